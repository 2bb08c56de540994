// "Open in Perfetto": hand a committed trace to ui.perfetto.dev through its documented postMessage
// protocol (https://perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui): open the UI, post
// "PING" until it answers "PONG", then post {perfetto: {buffer, title}}. Nothing is fetched until a
// reader clicks. Without JavaScript the link is a plain download of the same file.
// Every link with the class attnprof-perfetto works this way, however many a page has. When the UI
// does not answer within TIMEOUT_MS (no internet, say), the pinging stops and a line beside the
// button says so and offers the file itself.
// window.attnprofPerfettoUrl overrides the UI's address (the browser test points it at a local stub),
// window.attnprofPerfettoTimeoutMs the wait (the test shortens it on all but one page).
(function () {
  var TIMEOUT_MS = 8000;

  function note(link) {  // the line under the button's paragraph, made once per button
    if (link.attnprofNote) return link.attnprofNote;
    var line = document.createElement("p");
    line.className = "attnprof-perfetto-note";
    line.setAttribute("role", "status");
    var after = link.closest("p") || link;
    after.parentNode.insertBefore(line, after.nextSibling);
    link.attnprofNote = line;
    return line;
  }

  function say(link, text, withDownload) {
    var out = note(link);
    out.textContent = text;
    if (withDownload) {
      var a = document.createElement("a");
      a.href = link.href;
      a.setAttribute("download", "");
      a.textContent = "Download " + link.href.split("/").pop();
      out.appendChild(document.createTextNode(" "));
      out.appendChild(a);
      out.appendChild(document.createTextNode(" and open it later at ui.perfetto.dev (Open trace file) or in chrome://tracing."));
    }
  }

  function open(link) {
    var url = window.attnprofPerfettoUrl || "https://ui.perfetto.dev";
    var origin = new URL(url, location.href).origin;
    var timeout = window.attnprofPerfettoTimeoutMs || TIMEOUT_MS;
    var ui = window.open(url);  // at once, inside the click, so that no popup blocker stops it
    if (!ui) { location.href = link.href; return; }
    var buffer = null, ready = false, done = false, timer = null, deadline = null;
    function stop() {
      done = true;
      clearInterval(timer);
      clearTimeout(deadline);
      window.removeEventListener("message", onMessage);
      link.removeAttribute("aria-busy");
    }
    function send() {
      if (!buffer || !ready || done) return;
      ui.postMessage({perfetto: {buffer: buffer, title: link.dataset.title || link.textContent,
                                 fileName: link.getAttribute("download") || link.href.split("/").pop()}}, origin);
      stop();
      say(link, "");
    }
    function onMessage(e) {
      if (e.source !== ui || e.data !== "PONG") return;
      clearInterval(timer);
      clearTimeout(deadline);
      ready = true;
      send();
    }
    window.addEventListener("message", onMessage);
    timer = setInterval(function () {
      if (ui.closed) { stop(); return; }
      ui.postMessage("PING", origin);
    }, 50);
    deadline = setTimeout(function () {
      if (ready) return;
      stop();
      try { ui.close(); } catch (err) { /* the tab is the reader's now */ }
      say(link, "Perfetto did not answer within " + timeout / 1000 + " s (it loads from " + origin +
              ", which needs an internet connection).", true);
    }, timeout);
    link.setAttribute("aria-busy", "true");
    say(link, "Opening Perfetto…");
    fetch(link.href).then(function (r) {
      if (!r.ok) throw new Error(r.status + " " + r.statusText);
      return r.arrayBuffer();
    }).then(function (b) { buffer = b; send(); }).catch(function (err) {
      stop();
      say(link, "Could not read the trace (" + err + ").", true);
    });
  }
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest("a.attnprof-perfetto");
    if (!link || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) return;
    e.preventDefault();
    if (link.getAttribute("aria-busy") === "true") return;  // already on its way
    open(link);
  });
})();
