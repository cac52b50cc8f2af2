// Django's datetime widgets note "You are N hours ahead of server time." under each input when this
// browser's zone is not the one the form reads in. In the admin that zone is the account's
// (orgs.middleware.AdminZoneMiddleware; UTC for an account without one), named beside each input:
// the note says which zone it is and how far this browser is from it, also on inline rows added later.
(function () {
  "use strict";

  function say(note) {
    const zone = note.parentNode.querySelector(".zone-named");
    const offset = Number(document.body.dataset.adminUtcOffset);
    if (!zone || Number.isNaN(offset) || note.dataset.zoneNoted) return;
    const hours = (offset - new Date().getTimezoneOffset() * -60) / 3600;
    const meta = document.querySelector('meta[name="fairsched-zone"]');
    const whose = meta && meta.content ? ", your account's zone" : " (pick your zone at the top)";
    const far = `${Math.abs(hours)} ${Math.abs(hours) === 1 ? "hour" : "hours"} ${hours > 0 ? "ahead of" : "behind"}`;
    note.textContent = `Note: the times here are in ${zone.textContent}${whose}: ${far} this browser.`;
    note.dataset.zoneNoted = "1";
  }

  function sayAll(root) {
    root.querySelectorAll(".timezonewarning").forEach(say);
  }

  new MutationObserver((changes) => {
    for (const change of changes) {
      change.addedNodes.forEach((node) => {
        if (node.nodeType !== Node.ELEMENT_NODE) return;
        if (node.classList.contains("timezonewarning")) say(node);
        else sayAll(node);
      });
    }
  }).observe(document.documentElement, { childList: true, subtree: true });
  document.addEventListener("DOMContentLoaded", () => sayAll(document));
})();
