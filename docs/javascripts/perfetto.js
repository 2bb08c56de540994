// "Open in Perfetto": hand a committed trace to ui.perfetto.dev through its documented postMessage
// protocol (https://perfetto.dev/docs/visualization/deep-linking-to-perfetto-ui): open the UI, post
// "PING" until it answers "PONG", then post {perfetto: {buffer, title}}. Nothing is fetched until a
// reader clicks. Without JavaScript the link is a plain download of the same file.
// window.attnprofPerfettoUrl overrides the UI's address (the browser test points it at a local stub).
(function () {
  function open(link) {
    var url = window.attnprofPerfettoUrl || "https://ui.perfetto.dev";
    var origin = new URL(url, location.href).origin;
    var ui = window.open(url);  // at once, inside the click, so that no popup blocker stops it
    if (!ui) { location.href = link.href; return; }
    var buffer = null, ready = false, timer = null;
    function send() {
      if (!buffer || !ready) return;
      ui.postMessage({perfetto: {buffer: buffer, title: link.dataset.title || link.textContent,
                                 fileName: link.getAttribute("download") || link.href.split("/").pop()}}, origin);
      link.removeAttribute("aria-busy");
    }
    function onMessage(e) {
      if (e.source !== ui || e.data !== "PONG") return;
      window.removeEventListener("message", onMessage);
      clearInterval(timer);
      ready = true;
      send();
    }
    window.addEventListener("message", onMessage);
    timer = setInterval(function () {
      if (ui.closed) { clearInterval(timer); window.removeEventListener("message", onMessage); return; }
      ui.postMessage("PING", origin);
    }, 50);
    link.setAttribute("aria-busy", "true");
    fetch(link.href).then(function (r) {
      if (!r.ok) throw new Error(r.status + " " + r.statusText);
      return r.arrayBuffer();
    }).then(function (b) { buffer = b; send(); }).catch(function (err) {
      clearInterval(timer);
      link.removeAttribute("aria-busy");
      console.warn("attnprof: could not read " + link.href + ": " + err);
    });
  }
  document.addEventListener("click", function (e) {
    var link = e.target.closest && e.target.closest("a.attnprof-perfetto");
    if (!link || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey) return;
    e.preventDefault();
    open(link);
  });
})();
