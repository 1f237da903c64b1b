// The run page's interactive charts (Apache ECharts, static/echarts.min.js): parallel
// coordinates over the swept parameters and the metrics, and a metric against a parameter
// scatter with brushing and zoom. Brushing either one selects configurations: their rows of
// the leaderboard are highlighted, the others dimmed (or hidden: "only the selected").
// The data comes from /runs/<id>/charts.json; labels are put in the page as text only.
(function () {
  "use strict";
  var root = document.getElementById("run-charts");
  if (!root || typeof echarts === "undefined") return;
  var status = document.getElementById("chart-selection");
  var onlySelected = document.getElementById("only-selected");
  var table = document.getElementById("leaderboard");

  function escapeText(text) {
    return echarts.format.encodeHTML(String(text));
  }

  function select(ids, total) {
    var rows = table ? table.querySelectorAll("tr.config-row") : [];
    rows.forEach(function (tr) {
      var on = ids !== null && ids.has(tr.dataset.configId);
      tr.classList.toggle("chart-selected", on);
      tr.classList.toggle("chart-dimmed", ids !== null && !on);
    });
    status.textContent = ids === null
      ? "Brush an axis of the parallel coordinates, or an area of the scatter, to select configurations."
      : ids.size + " of " + total + " configurations selected.";
  }

  function value(row, name) {
    var v = row[name];
    return v === null || v === undefined ? "-" : v;
  }

  function parallel(el, data) {
    var chart = echarts.init(el);
    var dims = data.parameters.map(function (p) {
      if (p.numeric) return { name: p.name, type: "value", scale: true };
      var seen = {};
      data.rows.forEach(function (r) { seen[String(value(r, p.name))] = true; });
      return { name: p.name, type: "category", data: Object.keys(seen).sort() };
    }).concat(data.metrics.map(function (m) {
      return { name: m.replace(/_/g, " "), type: "value", scale: true };
    }));
    dims.forEach(function (d, i) { d.dim = i; d.nameTextStyle = { fontSize: 11 }; });
    var names = data.parameters.map(function (p) { return p.name; }).concat(data.metrics);
    chart.setOption({
      animation: false,
      parallel: { left: 60, right: 90, top: 50, bottom: 30 },
      parallelAxis: dims,
      tooltip: { formatter: function (p) { return escapeText(data.rows[p.dataIndex].label); } },
      series: [{
        type: "parallel",
        lineStyle: { width: 2, opacity: 0.6 },
        inactiveOpacity: 0.05,
        data: data.rows.map(function (r) {
          return names.map(function (n, i) {
            var v = value(r, n);
            return i < data.parameters.length && !data.parameters[i].numeric ? String(v) : v;
          });
        })
      }]
    });
    chart.on("axisareaselected", function () {
      var series = chart.getModel().getSeries()[0];
      var active = series.getRawIndicesByActiveState("active");
      var inactive = series.getRawIndicesByActiveState("inactive");
      select(inactive.length ? new Set(active.map(function (i) { return data.rows[i].config_id; })) : null,
             data.rows.length);
    });
    return chart;
  }

  function scatter(el, data, xName, yName) {
    var chart = echarts.init(el);
    var numeric = data.parameters.some(function (p) { return p.name === xName && p.numeric; });
    var rows = data.rows.filter(function (r) { return r[yName] !== null; });
    var categories = numeric ? undefined : Array.from(new Set(rows.map(function (r) {
      return String(value(r, xName));
    }))).sort();
    chart.setOption({
      animation: false,
      grid: { left: 60, right: 30, top: 40, bottom: 90 },
      toolbox: { feature: { brush: { type: ["rect", "clear"] }, dataZoom: {}, restore: {} } },
      brush: { xAxisIndex: 0, throttleType: "debounce", throttleDelay: 50 },
      dataZoom: [{ type: "inside", xAxisIndex: 0 }, { type: "inside", yAxisIndex: 0 },
                 { type: "slider", xAxisIndex: 0, bottom: 8 }],
      xAxis: { type: numeric ? "value" : "category", data: categories, name: xName,
               nameLocation: "middle", nameGap: 28, scale: true,
               boundaryGap: numeric ? ["8%", "8%"] : true },
      yAxis: { type: "value", name: yName.replace(/_/g, " "), scale: true,
               boundaryGap: ["8%", "8%"] },
      tooltip: { formatter: function (p) {
        var r = rows[p.dataIndex];
        return escapeText(r.label) + "<br>" + escapeText(xName) + ": " + escapeText(value(r, xName)) +
          "<br>" + escapeText(yName) + ": " + escapeText(r[yName]);
      } },
      series: [{
        type: "scatter",
        symbolSize: 11,
        data: rows.map(function (r) {
          return [numeric ? value(r, xName) : String(value(r, xName)), r[yName]];
        })
      }]
    });
    chart.dispatchAction({ type: "takeGlobalCursor", key: "brush",
                           brushOption: { brushType: "rect", brushMode: "single" } });
    chart.on("brushselected", function (params) {
      var picked = params.batch[0].selected[0].dataIndex;
      var areas = params.batch[0].areas.length;
      select(areas ? new Set(picked.map(function (i) { return rows[i].config_id; })) : null,
             data.rows.length);
    });
    return chart;
  }

  function option(selectEl, names, chosen) {
    names.forEach(function (n) {
      var o = document.createElement("option");
      o.value = n;
      o.textContent = n.replace(/_/g, " ");
      o.selected = n === chosen;
      selectEl.appendChild(o);
    });
  }

  fetch(root.dataset.src, { credentials: "same-origin" })
    .then(function (r) { return r.json(); })
    .then(function (data) {
      if (!data.rows.length) return;
      root.hidden = false;
      var charts = [parallel(document.getElementById("parallel-chart"), data)];
      var xSelect = document.getElementById("scatter-x");
      var ySelect = document.getElementById("scatter-y");
      var xs = data.parameters.map(function (p) { return p.name; });
      if (xs.length) {
        option(xSelect, xs, xs[0]);
        option(ySelect, data.metrics, data.metric);
        var el = document.getElementById("scatter-chart");
        var draw = function () {
          echarts.dispose(el);
          select(null, data.rows.length);
          charts[1] = scatter(el, data, xSelect.value, ySelect.value);
        };
        xSelect.addEventListener("change", draw);
        ySelect.addEventListener("change", draw);
        draw();
      }
      onlySelected.addEventListener("change", function () {
        if (table) table.classList.toggle("only-selected", onlySelected.checked);
      });
      select(null, data.rows.length);
      window.addEventListener("resize", function () {
        charts.forEach(function (c) { if (c) c.resize(); });
      });
      root.dataset.ready = "true";
    });
})();
