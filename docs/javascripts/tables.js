// Wide tables on a phone: a table that would scroll sideways in a narrow column, or that fits only by
// squeezing its sentences into columns a few words wide (a cell taller than TALL lines), is shown as
// cards instead, one row a card: its first cell as the card's heading, every other cell after its
// column's name ("Self CUDA: 84.0 µs"), so that every number is on screen. The stylesheet lays the cards
// out (table[data-cards] in extra.css); the op list has a phone layout of its own and is left alone.
(function () {
  var PHONE = window.matchMedia("(max-width: 44.9375em)"), TALL = 8;
  function squeezed(table) {
    return [...table.querySelectorAll("tbody td")].some(function (td) {
      var style = getComputedStyle(td), line = parseFloat(style.lineHeight) || 1.6 * parseFloat(style.fontSize);
      return td.getBoundingClientRect().height > TALL * line;
    });
  }
  function label(table) {
    if (table.dataset.labelled) return;
    var heads = [...table.querySelectorAll("thead th")].map(function (th) { return th.textContent.trim(); });
    table.querySelectorAll("tbody tr").forEach(function (tr) {
      [...tr.children].forEach(function (td, i) { if (heads[i]) td.dataset.label = heads[i]; });
    });
    table.dataset.labelled = "1";
  }
  function lay() {
    document.querySelectorAll(".md-typeset table:not([class])").forEach(function (table) {
      if (table.closest(".attnprof-oplist, .jupyter-wrapper")) return;
      delete table.dataset.cards;
      if (!PHONE.matches) return;
      var box = table.closest(".md-typeset__scrollwrap") || table.parentNode;
      var column = box.parentNode.clientWidth || box.clientWidth;
      if (table.offsetParent !== null && (table.scrollWidth > column + 1 || squeezed(table))) {
        label(table);
        table.dataset.cards = "";
      }
    });
  }
  document.addEventListener("DOMContentLoaded", lay);
  window.addEventListener("load", lay);
  PHONE.addEventListener("change", lay);
  document.addEventListener("change", function (e) {  // a tab opened: its tables are laid out now
    if (e.target.matches && e.target.matches(".tabbed-set > input")) lay();
  });
  document.addEventListener("toggle", lay, true);  // a details block opened
})();
