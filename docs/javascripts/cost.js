// Recompute "$ per million tokens" when the reader changes the price of a GPU-hour.
document.addEventListener("DOMContentLoaded", function () {
  var input = document.getElementById("attnprof-price");
  if (!input) return;
  function update() {
    var price = parseFloat(input.value);
    var dollars = function (tokensPerSecond) { return (price / 3600 / tokensPerSecond * 1e6).toFixed(3); };
    document.querySelectorAll("td.attnprof-cost").forEach(function (cell) {
      // the median's tokens/s, then the slowest and the fastest process's: "x [cheapest–dearest]"
      var range = (cell.dataset.tokensPerSRange || "").split(" ").map(parseFloat);
      var ends = range.length === 2 ? [dollars(range[1]), dollars(range[0])] : [];
      var spread = ends.length && ends[0] !== ends[1] ? " [" + ends[0] + "–" + ends[1] + "]" : "";
      cell.textContent = isFinite(price) ? dollars(parseFloat(cell.dataset.tokensPerS)) + spread : "—";
    });
  }
  input.addEventListener("input", update);
});
