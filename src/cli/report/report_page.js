// The page script of `zeus report` (embedded into the binary at build time): draws each
// <canvas data-chart> from the JSON in #zeus-report-data with Chart.js, then records in
// #zeus-report-status how many charts were drawn and any error, for tests and curious readers.
(function () {
  'use strict';

  var palette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2',
    '#17becf', '#7f7f7f', '#bcbd22'];
  var bandColours = ['rgba(255, 193, 7, 0.18)', 'rgba(23, 190, 207, 0.16)',
    'rgba(148, 103, 189, 0.16)', 'rgba(44, 160, 44, 0.14)'];

  // Numbers with an SI prefix: 12500 -> "12.5k".
  function si(value) {
    var abs = Math.abs(value);
    var units = [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']];
    for (var i = 0; i < units.length; i++) {
      if (abs >= units[i][0]) {
        return +(value / units[i][0]).toPrecision(3) + units[i][1];
      }
    }
    return +value.toPrecision(4) + '';
  }

  // Shaded vertical bands ({from, to, label} in x-axis units) behind the datasets: measurement
  // windows on timelines, the chosen power limit on profiles.
  var bandsPlugin = {
    id: 'zeusBands',
    beforeDatasetsDraw: function (chart, args, options) {
      var bands = (options && options.bands) || [];
      var area = chart.chartArea;
      var x = chart.scales.x;
      var ctx = chart.ctx;
      ctx.save();
      for (var i = 0; i < bands.length; i++) {
        var left = Math.max(x.getPixelForValue(bands[i].from), area.left);
        var right = Math.min(x.getPixelForValue(bands[i].to), area.right);
        if (right - left < 3) {  // a point in time or a single limit: still visible
          var middle = (left + right) / 2;
          left = middle - 2;
          right = middle + 2;
        }
        if (right < area.left || left > area.right) {
          continue;
        }
        ctx.fillStyle = bands[i].colour || bandColours[i % bandColours.length];
        ctx.fillRect(left, area.top, right - left, area.bottom - area.top);
        if (bands[i].label) {
          ctx.fillStyle = '#5a4a00';
          ctx.font = '12px sans-serif';
          ctx.textBaseline = 'top';
          ctx.fillText(bands[i].label, left + 4, area.top + 4 + 14 * (i % 3), right - left - 6);
        }
      }
      ctx.restore();
    }
  };

  function axis(title, extra) {
    var scale = {
      type: 'linear',
      title: { display: true, text: title, font: { size: 13 } },
      ticks: { callback: function (value) { return si(value); } }
    };
    for (var key in extra) {
      scale[key] = extra[key];
    }
    return scale;
  }

  function base(spec, scales, bands) {
    return {
      data: { datasets: [] },
      options: {
        responsive: true,
        maintainAspectRatio: false,
        animation: false,
        parsing: false,
        interaction: { mode: 'nearest', intersect: false },
        scales: scales,
        plugins: {
          title: { display: true, text: spec.title, font: { size: 15 } },
          legend: { position: 'top' },
          zeusBands: { bands: bands || [] }
        }
      },
      plugins: [bandsPlugin]
    };
  }

  function xy(points, xi, yi) {
    return points.map(function (p) { return { x: p[xi], y: p[yi] }; });
  }

  var builders = {
    timeline: function (spec) {
      var config = base(spec, { x: axis('Time since the first sample (s)', { bounds: 'data' }),
        y: axis(spec.y_title || 'Power (W)', { beginAtZero: !spec.y_title }) }, spec.bands);
      config.type = 'line';
      config.options.normalized = true;  // each series is sorted by time
      spec.series.forEach(function (series, i) {
        config.data.datasets.push({ label: series.label, data: xy(series.points, 0, 1),
          borderColor: palette[i % palette.length], backgroundColor: palette[i % palette.length],
          borderWidth: 1.5, pointRadius: 0, tension: 0, stepped: spec.stepped ? 'after' : false });
      });
      return config;
    },

    // A cumulative amount (gCO2eq, cost) per device and in all, with the rate it was integrated
    // with (gCO2eq/kWh, price/kWh), stepped, on the right axis.
    footprint: function (spec) {
      var config = base(spec, { x: axis('Time since the first sample (s)', { bounds: 'data' }),
        y: axis(spec.y_title, { position: 'left', beginAtZero: true }),
        y1: axis(spec.rate_title, { position: 'right', beginAtZero: true,
          grid: { drawOnChartArea: false } }) }, spec.bands);
      config.type = 'line';
      config.options.normalized = true;
      spec.series.forEach(function (series, i) {
        var total = series.label === 'total';
        var colour = total ? '#000' : palette[i % palette.length];
        config.data.datasets.push({ label: series.label, yAxisID: 'y',
          data: xy(series.points, 0, 1), borderColor: colour, backgroundColor: colour,
          borderWidth: total ? 2.5 : 1.5, pointRadius: 0, tension: 0 });
      });
      config.data.datasets.push({ label: spec.rate_title, yAxisID: 'y1',
        data: xy(spec.rate, 0, 1), stepped: 'after', borderColor: '#8c564b',
        backgroundColor: '#8c564b', borderDash: [6, 3], borderWidth: 1.5, pointRadius: 0 });
      return config;
    },

    'sim-cost': function (spec) {
      var config = base(spec, { x: axis('Recurrence', { ticks: { precision: 0 } }),
        y: axis('Cost per recurrence (J, log scale)', { type: 'logarithmic', ticks: {
          // 1, 2 and 5 times powers of ten only, so that labels do not crowd
          callback: function (value) {
            var mantissa = Math.round(value / Math.pow(10, Math.floor(Math.log10(value))));
            return mantissa === 1 || mantissa === 2 || mantissa === 5 ? si(value) : '';
          } } }) });
      config.type = 'line';
      var last = 1;
      spec.series.forEach(function (series, i) {
        config.data.datasets.push({ label: series.label + ' (mean over seeds)',
          data: xy(series.points, 0, 1), borderColor: palette[i % palette.length],
          backgroundColor: palette[i % palette.length], borderWidth: 1.5, pointRadius: 1.5 });
        series.points.forEach(function (p) { last = Math.max(last, p[0]); });
      });
      config.data.datasets.push({ label: 'oracle (expected)', data: [{ x: 1, y: spec.oracle },
        { x: last, y: spec.oracle }], borderColor: '#000', borderDash: [6, 4], borderWidth: 1.5,
        pointRadius: 0 });
      return config;
    },

    'sim-choice': function (spec) {
      var config = base(spec, { x: axis('Recurrence', { ticks: { precision: 0 } }),
        y: axis('Batch size', { position: 'left', beginAtZero: true }),
        y1: axis('Power limit (W)', { position: 'right', grid: { drawOnChartArea: false } }) });
      config.type = 'line';
      spec.series.forEach(function (series, i) {
        var colour = palette[i % palette.length];
        config.data.datasets.push({ label: series.label + ' batch size', yAxisID: 'y',
          data: xy(series.points, 0, 1), stepped: true, borderColor: colour,
          backgroundColor: colour, borderWidth: 2, pointRadius: 2 });
        config.data.datasets.push({ label: series.label + ' power limit', yAxisID: 'y1',
          data: xy(series.points, 0, 2), stepped: true, borderColor: colour,
          backgroundColor: colour, borderDash: [5, 3], borderWidth: 1.5, pointRadius: 2,
          pointStyle: 'rectRot' });
      });
      return config;
    },

    'sim-scatter': function (spec) {
      var config = base(spec, { x: axis('Expected time per recurrence (s)'),
        y: axis('Expected energy per recurrence (J)') });
      config.type = 'scatter';
      function points(list) {
        return list.map(function (p) { return { x: p[0], y: p[1], b: p[2], w: p[3] }; });
      }
      var markerColours = { rect: '#d62728', star: '#2ca02c', triangle: '#1f77b4',
        rectRot: '#9467bd' };
      spec.markers.forEach(function (marker, i) {
        config.data.datasets.push({ label: marker.label + ' (' + marker.point[2] + ', ' +
          marker.point[3] + ' W)', data: points([marker.point]), pointStyle: marker.style,
          pointRadius: 10, pointHoverRadius: 12, borderWidth: 2,
          borderColor: markerColours[marker.style] || palette[i % palette.length],
          backgroundColor: 'rgba(255, 255, 255, 0.4)' });
      });
      config.data.datasets.push({ label: 'Pareto front', data: points(spec.pareto),
        showLine: true, borderColor: '#ff7f0e', backgroundColor: '#ff7f0e', pointRadius: 3,
        borderWidth: 1.5 });
      config.data.datasets.push({ label: 'Configurations (batch size, power limit)',
        data: points(spec.configurations), borderColor: 'rgba(90, 100, 120, 0.7)',
        backgroundColor: 'rgba(90, 100, 120, 0.35)', pointRadius: 3 });
      config.options.plugins.tooltip = { callbacks: { label: function (item) {
        var raw = item.raw;
        return item.dataset.label.split(' (')[0] + ': batch size ' + raw.b + ', ' + raw.w +
          ' W: ' + si(raw.x) + ' s, ' + si(raw.y) + ' J';
      } } };
      return config;
    },

    profile: function (spec) {
      var config = base(spec, { x: axis('Power limit (W)'),
        y: axis('Energy (J)', { position: 'left' }),
        y1: axis('Time (s)', { position: 'right', grid: { drawOnChartArea: false } }) },
      [{ from: spec.chosen - 0.5, to: spec.chosen + 0.5, label: 'chosen: ' + spec.chosen + ' W',
        colour: 'rgba(255, 193, 7, 0.45)' }]);
      config.type = 'line';
      config.data.datasets.push({ label: 'Energy (J)', yAxisID: 'y', data: xy(spec.points, 0, 1),
        borderColor: palette[0], backgroundColor: palette[0], pointRadius: 4, borderWidth: 2 });
      config.data.datasets.push({ label: 'Time (s)', yAxisID: 'y1', data: xy(spec.points, 0, 2),
        borderColor: palette[1], backgroundColor: palette[1], pointRadius: 4, borderWidth: 2,
        borderDash: [5, 3] });
      var chosen = spec.points.filter(function (p) { return p[0] === spec.chosen; });
      config.data.datasets.push({ label: 'Chosen by ' + spec.selector + ': ' + spec.chosen + ' W',
        yAxisID: 'y', data: xy(chosen, 0, 1), pointStyle: 'star', pointRadius: 12,
        borderColor: '#b8860b', backgroundColor: '#ffc107', borderWidth: 2, showLine: false });
      return config;
    }
  };

  // Whether the canvas has any painted pixel.
  function painted(canvas) {
    if (!canvas.width || !canvas.height) {
      return false;
    }
    var pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    for (var i = 3; i < pixels.length; i += 4) {
      if (pixels[i] !== 0) {
        return true;
      }
    }
    return false;
  }

  function report(charts) {
    var nonempty = 0;
    charts.forEach(function (entry) {
      var points = 0;
      entry.chart.data.datasets.forEach(function (d) { points += d.data.length; });
      if (points > 0 && painted(entry.canvas)) {
        nonempty += 1;
      } else {
        window.zeusReportErrors.push('chart ' + entry.canvas.id + ' is empty');
      }
    });
    var status = document.createElement('div');
    status.id = 'zeus-report-status';
    status.hidden = true;
    status.setAttribute('data-charts', String(document.querySelectorAll('canvas[data-chart]').length));
    status.setAttribute('data-charts-nonempty', String(nonempty));
    status.setAttribute('data-errors', String(window.zeusReportErrors.length));
    status.textContent = window.zeusReportErrors.join('\n');
    document.body.appendChild(status);
  }

  var charts = [];
  try {
    var data = JSON.parse(document.getElementById('zeus-report-data').textContent);
    Chart.defaults.font.size = 13;
    document.querySelectorAll('canvas[data-chart]').forEach(function (canvas) {
      try {
        var spec = data.charts[canvas.id];
        var build = spec && builders[spec.kind];
        if (!build) {
          throw new Error('no chart data for ' + canvas.id);
        }
        charts.push({ canvas: canvas, chart: new Chart(canvas, build(spec)) });
      } catch (error) {
        console.error('zeus report: ' + canvas.id + ': ' + error);
      }
    });
  } catch (error) {
    console.error('zeus report: ' + error);
  }
  // Charts draw synchronously with animations off; check them once the page has laid out.
  window.setTimeout(function () { report(charts); }, 0);
})();
