// The kmq console's only script (served from the package; the pages allow no inline script). It formats times,
// redraws the overview every few seconds and follows the progress of redrive jobs. Every text it writes goes
// through textContent: nothing from a message is ever parsed as HTML.
"use strict";

const REFRESH_MS = 5000;

function formatTimes(root) {
  for (const cell of root.querySelectorAll(".ts[data-ms]")) {
    const ms = Number(cell.dataset.ms);
    if (ms > 0) cell.textContent = new Date(ms).toISOString().replace("T", " ").replace("Z", " UTC");
  }
}

function drawChart(svg, points) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  if (points.length < 2) return;
  const xs = points.map((p) => p[0]);
  const ys = points.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y1 = Math.max(1, ...ys);
  const coords = points.map(([x, y]) => `${(300 * (x - x0)) / Math.max(1, x1 - x0)},${78 - (74 * y) / y1}`);
  const line = document.createElementNS("http://www.w3.org/2000/svg", "polyline");
  line.setAttribute("points", coords.join(" "));
  line.setAttribute("fill", "none");
  line.setAttribute("stroke", "#2563eb");
  line.setAttribute("stroke-width", "2");
  svg.appendChild(line);
  const label = document.createElementNS("http://www.w3.org/2000/svg", "text");
  label.setAttribute("x", "2");
  label.setAttribute("y", "12");
  label.setAttribute("font-size", "10");
  label.textContent = `max ${Math.round(y1)}`;
  svg.appendChild(label);
}

function perMinute(samples, field) {
  // A figure may be unknown (null) in some samples: no point where either end of an interval does not know it.
  const points = [];
  for (let i = 1; i < samples.length; i++) {
    const before = samples[i - 1][field], after = samples[i][field];
    if (before === null || before === undefined || after === null || after === undefined) continue;
    const minutes = Math.max(1, samples[i].at_ms - samples[i - 1].at_ms) / 60000;
    points.push([samples[i].at_ms, (after - before) / minutes]);
  }
  return points;
}

function rateText(value) {
  return value === null ? "unknown" : value.toFixed(0);
}

function showQueue(section, queue) {
  const set = (selector, text) => {
    const element = section.querySelector(selector);
    if (element) element.textContent = text;
  };
  set(".queue-error", queue.error || "");
  if (queue.error) return; // Kafka did not answer: the last figures stay
  set(".backlog", String(queue.backlog));
  if (queue.in_flight !== null) set(".in-flight", String(queue.in_flight));
  if (queue.overdue_s !== null) set(".overdue", `${queue.overdue_s.toFixed(1)} s`);
  set(".partition-count", String(queue.partitions.length));
  if (queue.rates) {
    set(".rate-written", queue.rates.written.toFixed(0));
    set(".rate-received", queue.rates.received.toFixed(0));
    set(".rate-dead", queue.rates.dead_lettered.toFixed(0));
    set(".rate-acknowledged", rateText(queue.rates.acknowledged));
    set(".rate-redelivered", rateText(queue.rates.redelivered));
  }
  const rows = section.querySelectorAll("table.partitions tbody tr");
  queue.partitions.forEach((lag, i) => {
    const cells = rows[i] ? rows[i].children : [];
    if (cells.length === 4) {
      cells[1].textContent = String(lag.end_offset);
      cells[2].textContent = lag.committed_offset === null ? "—" : String(lag.committed_offset);
      cells[3].textContent = String(lag.backlog);
    }
  });
  const backlog = section.querySelector('svg[data-series="backlog"]');
  if (backlog) drawChart(backlog, queue.samples.map((s) => [s.at_ms, s.backlog]));
  for (const field of ["received", "acknowledged", "redelivered", "dead_lettered"]) {
    const chart = section.querySelector(`svg[data-series="${field}"]`);
    if (chart) drawChart(chart, perMinute(queue.samples, field));
  }
}

async function refreshOverview(root) {
  try {
    const answer = await fetch(root.dataset.source, { credentials: "same-origin" });
    if (answer.ok) {
      const data = await answer.json();
      for (const queue of data.queues) {
        for (const section of root.querySelectorAll("section.queue")) {
          if (section.dataset.queue === queue.name) showQueue(section, queue);
        }
      }
      root.dataset.refreshed = String(Date.now());
    }
  } finally {
    setTimeout(() => refreshOverview(root), REFRESH_MS);
  }
}

async function followJob(item) {
  const answer = await fetch(item.dataset.jobUrl, { credentials: "same-origin" });
  if (!answer.ok) return;
  const job = await answer.json();
  const bar = item.querySelector("progress");
  bar.max = job.total || 1;
  bar.value = job.done;
  const state = item.querySelector(".job-state");
  if (job.error) state.textContent = `failed: ${job.error}`;
  else if (job.finished) state.textContent = `done: ${job.result}`;
  else state.textContent = `${job.done} of ${job.total === null ? "?" : job.total}`;
  item.dataset.finished = job.finished ? "yes" : "no";
  if (!job.finished) setTimeout(() => followJob(item), 1000);
}

document.addEventListener("DOMContentLoaded", () => {
  formatTimes(document);
  const overview = document.getElementById("overview");
  if (overview) refreshOverview(overview);
  for (const item of document.querySelectorAll(".job[data-job-url]")) {
    if (item.dataset.finished !== "yes") followJob(item);
  }
});
