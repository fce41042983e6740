/* The memory page's sizing calculator: what its form (docsrc/_templates/sizing.html) does, on
   the data as evidence/sizing.py loads it, which the page embeds. evaluate() and recommend()
   do what their namesakes there do; tests/docs/test_memory_sizing.py checks it. */
"use strict";

const GB = 1e9;
const MEMORIES = ["host", "gpu", "shared"];

function value(coefficients, variables) {
  return Object.entries(coefficients).reduce((sum, [name, f]) => sum + f * variables[name], 0);
}

/* The host, GPU and host + GPU peaks of a setting for a model of `weights` bytes, estimated
   and (for a setting the benchmark measured) measured, and whether they fit a machine whose
   memories hold `limits` bytes ({host, gpu} or {shared}). */
function evaluate(data, settingId, weights, limits, workspace = 0, budget = null) {
  const setting = data.settings[settingId];

  // Step 1: the largest engine's weights S, and how many engines.
  let [engineWeights, engines, refused] = [weights, 1, ""];
  if (setting.partitioning === "partitioned") {
    const available = budget ?? limits.shared ?? limits.host;
    const remaining = available - (setting.offload === "on" ? weights : 0);
    if (data.partitioning.multiplier * weights >= remaining) {
      const piece = remaining / data.partitioning.multiplier;
      if (piece <= 0 || weights > piece * data.partitioning.max_engines) {
        refused = "the budget is too small: upstream's partitioner refuses the model";
      } else {
        [engineWeights, engines] = [piece, Math.ceil(weights / piece)];
      }
    }
  }
  const variables = { W: weights, S: engineWeights, bytes: 1, workspace: workspace };

  // Step 2: the estimate's peaks (the largest sum of a phase's terms, at each end) and the
  // measured peaks (the largest multiple of W measured, the workspace cap added to the GPU).
  const peaks = { host: {}, gpu: {}, shared: {} };
  for (const phase of Object.values(setting.phases)) {
    for (const memory of MEMORIES) {
      for (const bound of ["low", "high"]) {
        const values = phase[memory].map((name) => data.terms[name][bound]);
        const total = values.reduce((sum, term) => sum + value(term, variables), 0);
        if (total > (peaks[memory][bound] ?? -1)) {
          Object.assign(peaks[memory], { [bound]: total, [bound + "_phase"]: phase.id });
        }
      }
    }
  }
  let measured = null;
  if (setting.measured) {
    const extra = { host: 0, gpu: workspace, shared: workspace };
    measured = Object.fromEntries(
      MEMORIES.map((m) => [m, setting.measured.w[m] * weights + extra[m]]));
  }

  // Step 3: what fits: by the measured peaks where there are some, else by the estimate.
  const fit = (figures) => Object.keys(limits).every((m) => figures(m) <= limits[m]);
  const verdict = measured
    ? (fit((m) => measured[m]) ? "fits" : "does not fit")
    : fit((m) => peaks[m].high) ? "fits" : fit((m) => peaks[m].low) ? "may fit" : "does not fit";
  return { setting: settingId, S: engineWeights, engines, refused, peaks, measured, variables,
           verdict: refused ? "refused" : verdict };
}

function recommend(data, weights, limits, workspace = 0, budget = null) {
  const found = data.recommend.map((id) => evaluate(data, id, weights, limits, workspace, budget));
  const memory = "shared" in limits ? "shared" : "host";
  const built = found.filter((result) => !result.refused);
  const closest = (built.length ? built : found).reduce(
    (best, result) => (result.peaks[memory].low < best.peaks[memory].low ? result : best));
  return found.find((result) => result.verdict === "fits") ||
    found.find((result) => result.verdict === "may fit") || closest;
}

function gb(bytes) {
  const shown = bytes / GB;
  return (shown < 10 ? shown.toFixed(1) : shown.toFixed(0)) + " GB";
}

function span(low, high) {
  if (gb(low) === gb(high)) return gb(high);
  return (low <= 0 ? "0" : gb(low).replace(" GB", "")) + "-" + gb(high);
}

function wSpan([low, high]) {
  const [a, b] = [low.toFixed(2), high.toFixed(2)];
  return a === b ? `${a} W` : `${a}-${b} W`;
}

/* -- the page ------------------------------------------------------------------------------ */

function element(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, text] of Object.entries(attributes)) node.setAttribute(name, text);
  node.append(...children);
  return node;
}

/* What the benchmark measured for a setting, per memory of the machine: the figure for this
   model, then each measured model's multiple of W (a range over its runs), then where. */
function measuredPart(data, result, limits) {
  const measured = data.settings[result.setting].measured;
  const part = element("div", { class: "sizing-measured" },
    element("p", { class: "sizing-part-title" }, "Measured on TensorRT-RTX:"));
  for (const memory of Object.keys(limits)) {
    const models = element("ul", {});
    for (const [name, model] of Object.entries(measured.models)) {
      models.append(element("li", { "data-model": name, "data-memory": memory,
                                    "data-low": model[memory][0], "data-high": model[memory][1] },
        `${wSpan(model[memory])} with ${name} (${model.gib} GiB, ${model.runs} run(s))`));
    }
    const shown = `${data.memories[memory]} peak ${gb(result.measured[memory])}`;
    part.append(element("p", { class: "sizing-peak", "data-memory": memory }, shown), models);
  }
  part.append(element("p", { class: "sizing-hint" }, "on " + measured.sources.join("; ")));
  return part;
}

/* The estimate for a setting, per memory: the peak and what sets it (its phase, and its
   terms, each linked to its first source). */
function estimatePart(data, result, limits) {
  const setting = data.settings[result.setting];
  const title = setting.measured
    ? "Estimate for the standard TensorRT builder (not measured):"
    : "Estimate (not measured):";
  const part = element("div", { class: "sizing-estimate" },
    element("p", { class: "sizing-part-title" }, title));
  for (const memory of Object.keys(limits)) {
    const peak = result.peaks[memory];
    const phase = setting.phases[peak.high_phase];
    const terms = element("ul", {});
    for (const id of phase[memory]) {
      const term = data.terms[id];
      const [low, high] = [value(term.low, result.variables), value(term.high, result.variables)];
      const source = term.sources[0];
      const link = element("a", { href: source.link, title: source.says || "" }, term.name);
      if (high > 0) terms.append(element("li", {}, link, " " + span(low, high)));
    }
    const shown = `${data.memories[memory]} peak ${span(peak.low, peak.high)}`;
    part.append(element("p", { class: "sizing-range", "data-memory": memory }, shown),
      element("div", { class: "sizing-terms" }, `set by ${phase.name}:`, terms));
  }
  return part;
}

/* A setting's card: its verdict and on what it rests, the measured part, the estimate. */
function card(data, result, limits, machineMeasured) {
  const setting = data.settings[result.setting];
  const estimate = !machineMeasured || !result.measured;
  const title = element("p", { class: "sizing-result-title" }, element("strong", {}, setting.name),
    " ", element("span", { class: "sizing-verdict" }, result.verdict + (estimate ? " (estimate)" : "")));
  const node = element("div", { class: "sizing-result", "data-setting": setting.id,
                                "data-verdict": result.verdict }, title);
  if (result.refused) {
    node.append(element("p", {}, result.refused));
    return node;
  }
  if (!machineMeasured) node.append(element("p", { class: "sizing-hint" }, data.estimate_note));
  if (result.measured) node.append(measuredPart(data, result, limits));
  node.append(estimatePart(data, result, limits));
  if (setting.partitioning === "partitioned") {
    const engines = `${result.engines} engine(s) of at most ${gb(result.S)} of weights`;
    node.append(element("p", { class: "sizing-hint" }, engines));
  }
  return node;
}

function build() {
  const data = JSON.parse(document.getElementById("memory-terms").textContent);
  const field = (name) => document.getElementById("sizing-" + name);
  const readGB = (name) => (field(name).valueAsNumber >= 0 ? field(name).valueAsNumber * GB : null);

  // After a change of the field `changed`: the answer, and the chosen setting's card.
  function update(changed) {
    // Step 1: what the change fills in: a preset, its figures (its option's data-FIELD) and
    // note; parameters x dtype, the weights; weights typed in clear the parameters.
    if (changed === "machine") {
      const preset = field("machine").selectedOptions[0];
      field("machine-note").textContent = preset.title;
      for (const [key, figure] of Object.entries(preset.dataset)) field(key).value = figure;
    }
    const bytes = field("parameters").valueAsNumber * data.dtypes[field("dtype").value];
    if ((changed === "parameters" || changed === "dtype") && isFinite(bytes)) {
      field("weights").value = String(Math.round(bytes * 1000) / 1000);
    }
    if (changed === "weights") field("parameters").value = "";

    // Step 2: the machine, the model and the setting the form describes.
    const shared = field("kind").value === "shared";
    field("separate").hidden = shared;
    field("shared").hidden = !shared;
    const limits = shared
      ? { shared: readGB("usable") }
      : { host: readGB("host"), gpu: readGB("gpu") };
    const machine = data.machines[field("machine").value];
    const machineMeasured = Boolean(machine && machine.measured);
    const choice = Object.fromEntries(
      Object.keys(data.choices).map((name) => [name, field(name).value]));
    const chosen = Object.values(data.settings).find(
      (setting) => Object.entries(choice).every(([name, option]) => setting[name] === option));
    const weights = readGB("weights");
    const answer = field("answer");
    field("results").textContent = "";
    if (!weights || Object.values(limits).includes(null)) {
      answer.textContent = "Give the model's size and the machine's memory.";
      return;
    }

    // Step 3: the setting to use, and the chosen setting's card.
    const [workspace, budget] = [readGB("workspace") || 0, readGB("budget")];
    const best = recommend(data, weights, limits, workspace, budget);
    const name = data.settings[best.setting].name;
    const basis = machineMeasured && best.measured ? "" : " (estimate)";
    answer.dataset.setting = best.setting;
    answer.dataset.verdict = best.verdict;
    answer.textContent = best.verdict === "fits" || best.verdict === "may fit"
      ? `Use: ${name}: ${best.verdict}${basis}.`
      : weights > (limits.gpu ?? Infinity)
        ? `No setting fits: the engines alone need W = ${gb(weights)} on the GPU (see weight ` +
          "streaming below)."
        : `No setting fits this machine${basis}; the closest is ${name}.`;
    const result = evaluate(data, chosen.id, weights, limits, workspace, budget);
    field("results").append(card(data, result, limits, machineMeasured));
  }

  field("form").addEventListener("input", ({ target }) => update(target.id.replace("sizing-", "")));
  field("form").hidden = false;
  update("machine");
  update("parameters");
}

if (typeof document !== "undefined") build();
if (typeof module !== "undefined") module.exports = { evaluate, recommend, gb, span };
