// A lesson's evidence, opened where it is read. A checked sentence on a page says its lesson in the prose and
// keeps its evidence (ranges, method, processes, shape) in the folded box at the page's end, as a numbered note
// (attnprof/site/extension.py). A tap on the lesson's number opens that note under the paragraph it stands in,
// and a second tap closes it; a link straight to a note opens the folded box that holds it.
(function () {
  function note(link) {
    var id = decodeURIComponent(link.hash.slice(1));
    return id.indexOf("fn:evidence-") === 0 ? document.getElementById(id) : null;
  }
  document.addEventListener("click", function (event) {
    var link = event.target.closest ? event.target.closest("a.footnote-ref") : null;
    var source = link && note(link);
    if (!source) return;
    event.preventDefault();
    var block = link.closest("p, li, td, th, dd, h1, h2, h3, h4") || link.parentNode;
    var key = source.id, open = document.querySelector('.attnprof-evidence[data-for="' + key + '"]');
    if (open) {
      open.remove();
      link.setAttribute("aria-expanded", "false");
      return;
    }
    var box = document.createElement("div");
    box.className = "attnprof-evidence";
    box.dataset.for = key;
    box.setAttribute("role", "note");
    Array.prototype.forEach.call(source.childNodes, function (child) { box.appendChild(child.cloneNode(true)); });
    Array.prototype.forEach.call(box.querySelectorAll(".footnote-backref"), function (a) { a.remove(); });
    // notes open in their numbers' order, whichever is tapped first
    var n = parseInt(link.textContent, 10) || 0, at = block;
    box.dataset.n = n;
    box.setAttribute("aria-label", "Evidence " + n);
    if (block.tagName === "P") {
      while (at.nextElementSibling && at.nextElementSibling.classList.contains("attnprof-evidence") &&
             +at.nextElementSibling.dataset.n < n) at = at.nextElementSibling;
      at.after(box);
    } else {
      var later = Array.prototype.find.call(block.children, function (b) {
        return b.classList.contains("attnprof-evidence") && +b.dataset.n > n;
      });
      block.insertBefore(box, later || null);
    }
    link.setAttribute("aria-expanded", "true");
  });
  function reveal() {  // a link to a note inside the closed box: open the box
    var target = location.hash && document.getElementById(decodeURIComponent(location.hash.slice(1)));
    for (var el = target; el; el = el.parentElement) if (el.tagName === "DETAILS") el.open = true;
    if (target) target.scrollIntoView();
  }
  window.addEventListener("hashchange", reveal);
  reveal();
})();
