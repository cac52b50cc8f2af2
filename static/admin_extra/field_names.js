// Every control of the admin's forms gets an accessible name (axe: label, aria-input-field-name): the
// controls of a tabular inline's rows have a column heading but no <label>, and Django's autocompletes
// (select2) name their combobox by the value picked only, empty while nothing is, and their search
// field not at all. Each gets the name of its field: its <label>, or the column's heading.
(function () {
  "use strict";

  function fieldName(control) {
    const label = document.querySelector(`label[for="${CSS.escape(control.id)}"]`);
    if (label) return label.textContent.replace(/:\s*$/, "").trim();
    const cell = control.closest("td[class*='field-']");
    const column = cell && [...cell.classList].find((c) => c.startsWith("field-"));
    const heading = column && cell.closest("table").querySelector(`th.column-${CSS.escape(column.slice(6))}`);
    return (heading ? heading.textContent : control.name.split("-").pop()).trim();
  }

  function name(root) {
    root.querySelectorAll("td[class*='field-'] :is(input, select, textarea):not([type=hidden])").forEach((control) => {
      if (control.labels.length || control.hasAttribute("aria-label") || !control.id) return;
      control.setAttribute("aria-label", fieldName(control));
    });
    root.querySelectorAll("select.admin-autocomplete").forEach((select) => {
      const box = select.nextElementSibling && select.nextElementSibling.querySelector(".select2-selection");
      if (!box || select.name.includes("__prefix__")) return;
      // The combobox and the text of what is picked inside it both carry the field's name (the
      // combobox's own aria-labelledby points at that text only, empty while nothing is picked).
      const field = fieldName(select);
      box.removeAttribute("aria-labelledby");
      box.setAttribute("aria-label", field);
      const picked = box.querySelector(".select2-selection__rendered");
      if (picked) picked.setAttribute("aria-label", field);
    });
  }

  // After Django's autocomplete.js has made them: its ready handler comes before this one (this file is
  // deferred, the form's scripts are not), and jQuery's ready handlers run late (after the page's load
  // when its files come from the cache); and for each inline row added.
  const $ = window.django && window.django.jQuery;
  if (!$) return;
  $(() => name(document));
  document.addEventListener("formset:added", (e) => setTimeout(() => name(e.target), 0));
  // While select2 searches or finds nothing it says so in an item of its list with role=alert, which a
  // listbox may not hold: the item becomes an option no one can pick, still announced (aria-live).
  new MutationObserver(() => {
    document.querySelectorAll("[role=listbox] > .select2-results__message[role=alert]").forEach((item) => {
      item.setAttribute("role", "option");
      item.setAttribute("aria-disabled", "true");
    });
  }).observe(document.body, { childList: true, subtree: true });
  {
    // Open, the combobox names the list it controls (ARIA 1.2; select2 gives aria-owns only).
    const box = (select) => select.nextElementSibling && select.nextElementSibling.querySelector(".select2-selection");
    $(document).on("select2:close", (e) => { const b = box(e.target); if (b) b.removeAttribute("aria-controls"); });
    $(document).on("select2:open", (e) => {
      const b = box(e.target);
      if (b && b.getAttribute("aria-owns")) b.setAttribute("aria-controls", b.getAttribute("aria-owns"));
      const search = document.querySelector(".select2-container--open .select2-search__field");
      if (search) search.setAttribute("aria-label", `Search ${fieldName(e.target).toLowerCase()}`);
    });
  }
})();
