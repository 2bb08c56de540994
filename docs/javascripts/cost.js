// Recompute "$ per million tokens" when the reader changes the price of a GPU-hour.
document.addEventListener("DOMContentLoaded", function () {
  var input = document.getElementById("attnprof-price");
  if (!input) return;
  function update() {
    var price = parseFloat(input.value);
    document.querySelectorAll("td.attnprof-cost").forEach(function (cell) {
      var tokensPerSecond = parseFloat(cell.dataset.tokensPerS);
      cell.textContent = isFinite(price) ? (price / 3600 / tokensPerSecond * 1e6).toFixed(3) : "—";
    });
  }
  input.addEventListener("input", update);
});
