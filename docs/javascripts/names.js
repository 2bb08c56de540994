// Full names by tap as well as by hover: a touch screen has no hover, so tapping a kernel's short name
// in a table (its title attribute) or a mark in a figure (its SVG <title>) shows that text in a tip at
// the foot of the screen; tapping anything else hides it. The tip starts with the short name and the
// time (a GPU op's title says both on its first line; a table's short name is the tapped text itself),
// then at most SHOWN characters of the full name, with a button that shows the rest.
// A tap on a trace's lane beside its marks (between bars thinner than a finger, on the GPU's idle time,
// on the launch row) lists the marks within half a finger of it, each a button that shows its own tip.
// And a region that scrolls sideways (a wide table, a chart on a phone, a long code line) can take the
// keyboard's focus, so that it can be scrolled without a pointer (WCAG 2.1.1).
(function () {
  var SHOWN = 150, FINGER = 24;  // characters of a full name shown at first; px of a fingertip
  var tip = null, marked = null;
  function make(tag, className, text) {
    var el = document.createElement(tag);
    if (className) el.className = className;
    if (text) el.textContent = text;
    return el;
  }
  function open() {
    if (!tip) {
      tip = make("div", "attnprof-tip");
      tip.setAttribute("role", "status");
      document.body.appendChild(tip);
    }
    if (marked) marked.classList.remove("attnprof-tapped");
    tip.textContent = "";
    delete tip.dataset.head;
    tip.classList.remove("attnprof-tip-all");
    tip.hidden = false;
  }
  function mark(target) {
    marked = target;
    marked.classList.add("attnprof-tapped");
  }
  // The tip's text is the mark's title itself, whole (a reader who copies it gets the full name):
  // its first line, when it has two, in bold; a short name given apart (a table's) shown above it.
  function show(target, text, head) {
    open();
    mark(target);
    var nl = text.indexOf("\n"), rest = nl < 0 ? text : text.slice(nl + 1);
    if (nl >= 0) tip.append(make("strong", "attnprof-tip-head", text.slice(0, nl)), "\n");
    else if (head && head !== text) tip.dataset.head = head;
    tip.append(make("span", "", rest.slice(0, SHOWN)));
    if (rest.length > SHOWN) {
      var more = make("button", "attnprof-tip-more");
      more.type = "button";
      more.setAttribute("aria-label", "show the whole name");
      more.setAttribute("aria-expanded", "false");
      more.addEventListener("click", function () {
        var all = tip.classList.toggle("attnprof-tip-all");
        more.setAttribute("aria-expanded", String(all));
      });
      tip.append(make("span", "attnprof-tip-rest", rest.slice(SHOWN)), more);
    }
  }
  function list(target, marks) {  // the marks under a finger on a lane, each one tap from its tip
    open();
    mark(target);
    tip.append(make("strong", "attnprof-tip-head", marks.length + " marks here: tap one"));
    marks.forEach(function (m) {
      var text = titleOf(m), b = make("button", "attnprof-tip-pick", text.split("\n")[0].slice(0, 80));
      b.type = "button";
      b.addEventListener("click", function () { show(m, text); });
      tip.append(b);
    });
  }
  function hide() {
    if (tip) tip.hidden = true;
    if (marked) marked.classList.remove("attnprof-tapped");
    marked = null;
  }
  function titleOf(el) {
    var t = el.querySelector(":scope > title");
    return t ? t.textContent : null;
  }
  function timeIn(row) {  // the time in a table row, shown beside its kernel's short name
    var cells = row ? row.querySelectorAll("td") : [];
    for (var i = 0; i < cells.length; i++) {
      if (/^[\d.,]+ (µs|ms|s)$/.test(cells[i].textContent.trim())) return cells[i].textContent.trim();
    }
    return "";
  }
  function named(el) {  // the element whose full name a tap on `el` shows, that name, and its short name
    var code = el.closest && el.closest(".md-typeset td [title], .md-typeset th [title]");
    if (code) {
      var time = timeIn(code.closest("tr"));
      return [code, code.getAttribute("title"), code.textContent.trim() + (time ? " " + time : "")];
    }
    var row = el.closest && el.closest(".md-typeset svg .attnprof-legend[data-op]");
    if (row) {  // a trace's legend row: its op's bar says the name
      var bar = row.closest("svg").querySelectorAll(".attnprof-gpu-op")[row.dataset.op - 1];
      if (bar) return [row, titleOf(bar)];
    }
    var mark = el.closest && el.closest(".md-typeset svg[role=img] *");
    for (; mark && mark.tagName.toLowerCase() !== "svg"; mark = mark.parentNode) {
      var title = titleOf(mark);
      if (title) return [mark, title];
    }
    return null;
  }
  function underFinger(svg, e) {  // a trace's marks in the lane at the tap, within half a finger of it
    var marks = [...svg.querySelectorAll("rect:not(.attnprof-idle)")].filter(function (r) { return titleOf(r); });
    var lane = marks.filter(function (r) {
      var b = r.getBoundingClientRect();
      return e.clientY >= b.top && e.clientY <= b.bottom;
    });
    return lane.filter(function (r) {
      var b = r.getBoundingClientRect();
      return b.right >= e.clientX - FINGER / 2 && b.left <= e.clientX + FINGER / 2;
    }).sort(function (a, b) { return a.getBoundingClientRect().left - b.getBoundingClientRect().left; });
  }
  document.addEventListener("click", function (e) {
    if (e.target.closest && e.target.closest("a, button, input, label")) return;
    if (tip && tip.contains(e.target)) return;  // a tap on the tip keeps it, to read or copy
    var trace = e.target.closest && e.target.closest(".md-typeset .attnprof-trace svg");
    var hit = named(e.target);
    if (trace && !(hit && !hit[0].classList.contains("attnprof-idle"))) {  // the lane between marks, or idle
      var near = underFinger(trace, e);
      if (near.length > 1) {
        if (marked === trace) hide();
        else list(trace, near);
        return;
      }
      if (near.length === 1) hit = [near[0], titleOf(near[0])];
    }
    if (hit && hit[0] !== marked) show(hit[0], hit[1], hit[2]);
    else hide();
  });
  document.addEventListener("keydown", function (e) { if (e.key === "Escape") hide(); });

  // Each long name is sent once per page (the Markdown extension's NamesOnce): copy it back where it
  // repeats. And a figure's narrow drawing borrows the hover text of the wide one's marks, mark for mark: a
  // chart's points, a trace's GPU ops (whose full names run to hundreds of characters).
  function borrow(box, wideMarks, narrowMarks) {
    var wide = box.querySelectorAll(wideMarks), narrow = box.querySelectorAll(narrowMarks);
    if (wide.length !== narrow.length) return;
    narrow.forEach(function (mark, i) { if (!titleOf(mark)) mark.append(wide[i].cloneNode(true)); });
  }
  function names() {
    document.querySelectorAll("[data-same]").forEach(function (el) {
      var first = document.querySelector('[data-name="' + el.dataset.same + '"]');
      if (first) el.setAttribute("title", first.getAttribute("title"));
    });
    document.querySelectorAll(".attnprof-figure").forEach(function (figure) {
      borrow(figure, "svg.attnprof-wide circle > title", "svg.attnprof-narrow .attnprof-point");
    });
    document.querySelectorAll(".attnprof-trace").forEach(function (trace) {
      borrow(trace, "svg.attnprof-wide .attnprof-gpu-op > title", "svg.attnprof-narrow .attnprof-gpu-op");
    });
  }
  names();

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
