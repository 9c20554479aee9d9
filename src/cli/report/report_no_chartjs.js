/* Stand-in for Chart.js, embedded by zeus report when zeus was built without it (no
   libjs-chart.js at configure time; the configure step warned). The page keeps its tables and
   data; each chart is replaced by a note that says how to get the charts. */
(function () {
  "use strict";
  function Chart(canvas, config) {
    var note = document.createElement("p");
    note.className = "zeus-no-chartjs";
    note.textContent =
      "This chart needs Chart.js, which this zeus was built without: install Debian's " +
      "libjs-chart.js (or set ZEUS_CHARTJS_PATH) and rebuild zeus, then run zeus report again.";
    if (canvas && canvas.parentNode) {
      canvas.parentNode.replaceChild(note, canvas);
    }
    this.canvas = canvas;
    this.data = (config && config.data) || { datasets: [] };
  }
  Chart.prototype.destroy = function () {};
  Chart.prototype.update = function () {};
  Chart.defaults = { font: {}, plugins: {} };
  Chart.register = function () {};
  window.Chart = Chart;
})();
