// Full names by tap as well as by hover: a touch screen has no hover, so tapping a kernel's short name
// in a table (its title attribute) or a mark in a figure (its SVG <title>) shows that text in a caption
// at the foot of the screen; tapping anything else hides it.
// And a region that scrolls sideways (a wide table, a chart on a phone, a long code line) can take the
// keyboard's focus, so that it can be scrolled without a pointer (WCAG 2.1.1).
(function () {
  var tip = null, marked = null;
  function show(target, text) {
    if (!tip) {
      tip = document.createElement("div");
      tip.className = "attnprof-tip";
      tip.setAttribute("role", "status");
      document.body.appendChild(tip);
    }
    if (marked) marked.classList.remove("attnprof-tapped");
    marked = target;
    marked.classList.add("attnprof-tapped");
    tip.textContent = text;
    tip.hidden = false;
  }
  function hide() {
    if (tip) tip.hidden = true;
    if (marked) marked.classList.remove("attnprof-tapped");
    marked = null;
  }
  function named(el) {  // the element whose full name a tap on `el` shows, and that name
    var code = el.closest && el.closest(".md-typeset td [title], .md-typeset th [title]");
    if (code) return [code, code.getAttribute("title")];
    var mark = el.closest && el.closest(".md-typeset svg[role=img] *");
    for (; mark && mark.tagName.toLowerCase() !== "svg"; mark = mark.parentNode) {
      var title = mark.querySelector(":scope > title");
      if (title) return [mark, title.textContent];
    }
    return null;
  }
  document.addEventListener("click", function (e) {
    if (e.target.closest && e.target.closest("a, button, input, label")) return;
    var hit = named(e.target);
    if (hit && hit[0] !== marked) show(hit[0], hit[1]);
    else hide();
  });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape") hide(); });

  var SCROLLS = ".md-typeset__scrollwrap, .md-typeset pre > code, .attnprof-figure, .attnprof-trace, " +
                ".jp-Cell .highlight-ipynb, .jp-OutputArea-output pre";
  function focusable() {
    document.querySelectorAll(SCROLLS).forEach(function (el) {
      var scrolls = el.scrollWidth > el.clientWidth + 1;
      if (scrolls && !el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
        el.dataset.attnprofScroll = "";
      } else if (!scrolls && "attnprofScroll" in el.dataset) {
        el.removeAttribute("tabindex");
        delete el.dataset.attnprofScroll;
      }
    });
  }
  window.addEventListener("load", focusable);
  window.addEventListener("resize", focusable);
  document.addEventListener("DOMContentLoaded", focusable);
})();
