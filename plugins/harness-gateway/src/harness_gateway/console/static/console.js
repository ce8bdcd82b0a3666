// The harness console's scripts: charts (Chart.js, vendored) and the Live table (SSE).
// Series are told apart by line dash and point shape as well as colour (Okabe-Ito palette).
"use strict";

const COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];
const DASHES = [[], [8, 4], [2, 3], [12, 3, 2, 3], [4, 4], [1, 2], [10, 6], [6, 2, 2, 2]];
const POINTS = ["circle", "triangle", "rect", "rectRot", "cross", "star", "crossRot", "dash"];

function drawCharts() {
  if (typeof Chart === "undefined") return;
  for (const canvas of document.querySelectorAll("canvas[data-chart]")) {
    const source = document.getElementById(canvas.dataset.chart);
    const data = JSON.parse(source.textContent);
    const unit = canvas.dataset.unit;
    const datasets = data.series.map((s, i) => ({
      label: s.name,
      data: s.values,
      borderColor: COLOURS[i % COLOURS.length],
      backgroundColor: COLOURS[i % COLOURS.length],
      borderDash: DASHES[i % DASHES.length],
      pointStyle: POINTS[i % POINTS.length],
      pointRadius: 4,
      borderWidth: 2,
      tension: 0,
    }));
    canvas.chart = new Chart(canvas, {
      type: "line",
      data: { labels: data.labels, datasets },
      options: {
        animation: false,
        maintainAspectRatio: false,
        plugins: { legend: { labels: { usePointStyle: true } } },
        scales: { y: { beginAtZero: true, title: { display: true, text: unit === "usd" ? "USD" : unit } } },
      },
    });
  }
}

function cell(row, text, header, numeric) {
  const element = document.createElement(header ? "th" : "td");
  if (header) element.scope = "row";
  if (numeric) element.className = "n";
  element.textContent = text;
  row.appendChild(element);
}

function followLive() {
  const table = document.getElementById("live-table");
  if (!table) return;
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const status = document.getElementById("live-status");
  const events = new EventSource(table.dataset.live);
  events.addEventListener("streams", (event) => {
    const streams = JSON.parse(event.data);
    const body = document.createElement("tbody");
    for (const s of streams) {
      const row = document.createElement("tr");
      row.dataset.id = s.id;
      cell(row, s.request_id, true);
      cell(row, s.route);
      cell(row, s.model);
      cell(row, s.key);
      cell(row, s.elapsed_s.toFixed(1), false, true);
      cell(row, String(s.deltas), false, true);
      cell(row, s.output_tokens === null ? "–" : String(s.output_tokens), false, true);
      const action = document.createElement("td");
      if (s.aborting) {
        action.textContent = "aborting…";
      } else {
        const form = document.createElement("form");
        form.method = "post";
        form.action = "/console/live/" + encodeURIComponent(s.id) + "/abort";
        const token = document.createElement("input");
        token.type = "hidden";
        token.name = "csrf";
        token.value = csrf;
        const button = document.createElement("button");
        button.type = "submit";
        button.textContent = "Abort";
        button.setAttribute("aria-label", "Abort request " + s.request_id);
        form.append(token, button);
        action.appendChild(form);
      }
      row.appendChild(action);
      body.appendChild(row);
    }
    table.replaceChild(body, table.tBodies[0]);
    const text = streams.length + " stream(s) in flight.";
    if (status.textContent !== text) status.textContent = text;
    table.dataset.updates = String(Number(table.dataset.updates || 0) + 1);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  drawCharts();
  followLive();
});
