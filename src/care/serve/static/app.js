// Search page of the CARE service: POST /search and render the hits (text via textContent only).
"use strict";

const form = document.getElementById("search-form");
const queryInput = document.getElementById("query");
const kInput = document.getElementById("k");
const keyInput = document.getElementById("api-key");
const results = document.getElementById("results");
const errorBox = document.getElementById("error");
const took = document.getElementById("took");
const statusLine = document.getElementById("status");

keyInput.value = localStorage.getItem("care-api-key") || "";

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = keyInput.value.trim();
  if (key) {
    localStorage.setItem("care-api-key", key);
    h["Authorization"] = "Bearer " + key;
  }
  return h;
}

async function loadHealth() {
  try {
    const response = await fetch("/health");
    const health = await response.json();
    statusLine.textContent = `${health.documents} documents · ${health.dim}-d · queries encoded by ` +
      `${health.query_encoder} · documents encoded by ${health.index_model}`;
  } catch (err) {
    statusLine.textContent = "service unreachable";
  }
}

function renderHits(hits) {
  results.replaceChildren();
  for (const hit of hits) {
    const item = document.createElement("li");
    item.className = "hit";
    const head = document.createElement("div");
    const id = document.createElement("span");
    id.className = "doc-id";
    id.textContent = hit.title ? `${hit.title} (${hit.id})` : hit.id;
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = hit.score.toFixed(4);
    head.append(id, score);
    const text = document.createElement("p");
    text.className = "doc-text";
    text.textContent = hit.text;
    item.append(head, text);
    results.append(item);
  }
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  errorBox.textContent = "";
  took.textContent = "";
  const body = { query: queryInput.value, k: Number(kInput.value) || 10 };
  try {
    const response = await fetch("/search", { method: "POST", headers: headers(), body: JSON.stringify(body) });
    const data = await response.json();
    if (!response.ok) {
      results.replaceChildren();
      errorBox.textContent = data.detail || `error ${response.status}`;
      return;
    }
    renderHits(data.hits);
    took.textContent = `${data.hits.length} hits in ${data.took_ms.toFixed(1)} ms`;
  } catch (err) {
    errorBox.textContent = String(err);
  }
});

loadHealth();
