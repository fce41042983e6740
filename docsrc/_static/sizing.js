/* The memory page's sizing calculator.

   It reads docsrc/_data/memory_terms.json, which the page embeds (<script id="memory-terms">),
   so it works from file:// without a server. The arithmetic is evaluate() below, the same as
   evaluate() in docsrc/_ext/memory_sizing.py: tests/docs/test_memory_sizing.py runs both on the
   same cases (this file under node, and the page in a headless browser). */
"use strict";

var GB = 1e9;

function matches(item, selector) {
  return Object.keys(selector || {}).every(function (key) {
    return item[key] === selector[key];
  });
}

function value(coefficients, variables) {
  return Object.keys(coefficients).reduce(function (sum, name) {
    return sum + coefficients[name] * variables[name];
  }, 0);
}

function byId(list, id) {
  return list.filter(function (item) { return item.id === id; })[0];
}

/* The terms that count on the `side` ("host" or "gpu") of a phase under a setting. */
function present(data, setting, phase, side) {
  return phase[side].filter(function (entry) {
    return matches(setting, entry.when) && byId(data.terms, entry.term).in_peaks !== false;
  }).map(function (entry) { return byId(data.terms, entry.term); });
}

/* The host, GPU and host + GPU peaks of one setting for a model of `weights` bytes on
   `machine` ({kind, gpu_bytes, host_bytes} or {kind: "shared", usable_bytes}). */
function evaluate(data, setting, weights, machine, workspace, budget) {
  // Step 1: the largest engine's weights S, and how many engines.
  var pieces = data.partitioning;
  var engineWeights = weights, engines = 1, refused = "";
  if (setting.partitioning) {
    var host = machine.kind === "shared" ? machine.usable_bytes : machine.host_bytes;
    var available = budget == null ? host : budget;
    var remaining = available - (setting.offload ? weights : 0);
    if (pieces.multiplier * weights >= remaining) {
      var piece = remaining / pieces.multiplier;
      if (piece <= 0 || weights > piece * pieces.max_engines) {
        refused = "the budget is too small: upstream's partitioner refuses the model";
      } else {
        engineWeights = piece;
        engines = Math.ceil(weights / piece);
      }
    }
  }
  var variables = { W: weights, S: engineWeights, bytes: 1, workspace: workspace || 0 };

  // Step 2: the sums of each phase, at both ends.
  var peaks = {};
  ["low", "high"].forEach(function (bound) {
    data.phases.forEach(function (phase) {
      if (!matches(setting, phase.when)) return;
      var sums = {};
      ["host", "gpu"].forEach(function (memory) {
        sums[memory] = present(data, setting, phase, memory).reduce(function (sum, term) {
          return sum + value(term[bound], variables);
        }, 0);
      });
      sums.shared = sums.host + sums.gpu;
      Object.keys(sums).forEach(function (memory) {
        var peak = peaks[memory] = peaks[memory] || {};
        if (sums[memory] > (bound in peak ? peak[bound] : -1)) {
          peak[bound] = sums[memory];
          peak[bound + "_phase"] = phase.id;
        }
      });
    });
  });

  // Step 3: what fits.
  var limits = machine.kind === "shared"
    ? { shared: machine.usable_bytes }
    : { host: machine.host_bytes, gpu: machine.gpu_bytes };
  var within = function (bound) {
    return Object.keys(limits).every(function (memory) {
      return peaks[memory][bound] <= limits[memory];
    });
  };
  var verdict = refused ? "refused" : within("high") ? "fits" : within("low") ? "may fit" : "does not fit";
  return { setting: setting.id, S: engineWeights, engines: engines, refused: refused,
           peaks: peaks, verdict: verdict, variables: variables };
}

function recommend(data, weights, machine, workspace, budget) {
  var results = data.recommend.map(function (id) {
    return evaluate(data, byId(data.settings, id), weights, machine, workspace, budget);
  });
  var found = results.filter(function (r) { return r.verdict === "fits"; })[0] ||
    results.filter(function (r) { return r.verdict === "may fit"; })[0];
  if (found) return found;
  var memory = machine.kind === "shared" ? "shared" : "host";
  var built = results.filter(function (result) { return !result.refused; });
  return (built.length ? built : results).reduce(function (best, result) {
    return result.peaks[memory].low < best.peaks[memory].low ? result : best;
  });
}

function gb(bytes) {
  var shown = bytes / GB;
  return (shown < 10 ? shown.toFixed(1) : shown.toFixed(0)) + " GB";
}

function span(low, high) {
  if (gb(low) === gb(high)) return gb(high);
  return (low <= 0 ? "0" : gb(low).replace(" GB", "")) + "-" + gb(high);
}

/* -- the page ------------------------------------------------------------------------------ */

function element(tag, attributes, children) {
  var node = document.createElement(tag);
  Object.keys(attributes || {}).forEach(function (name) { node.setAttribute(name, attributes[name]); });
  (children || []).forEach(function (child) {
    node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  });
  return node;
}

function field(label, input, hint) {
  var children = [element("span", { "class": "sizing-label" }, [label]), input];
  if (hint) children.push(element("span", { "class": "sizing-hint" }, [hint]));
  return element("label", { "class": "sizing-field" }, children);
}

function numberInput(id, step) {
  return element("input", { id: id, type: "number", min: "0", step: step || "any", inputmode: "decimal" });
}

function readGB(input) {
  var number = parseFloat(input.value);
  return isFinite(number) && number >= 0 ? number * GB : null;
}

function build(root, data) {
  var dtypes = Object.keys(data.dtypes);
  var parameters = numberInput("sizing-parameters");
  var dtype = element("select", { id: "sizing-dtype" }, dtypes.map(function (name) {
    return element("option", { value: name }, [name + " (" + data.dtypes[name] + " B)"]);
  }));
  var weights = numberInput("sizing-weights");
  var machineSelect = element("select", { id: "sizing-machine" },
    data.machines.map(function (machine) {
      return element("option", { value: machine.id }, [machine.name]);
    }).concat([element("option", { value: "own" }, ["your own figures"])]));
  var kind = element("select", { id: "sizing-kind" }, [
    element("option", { value: "discrete" }, ["separate GPU and host memory"]),
    element("option", { value: "shared" }, ["one memory shared by CPU and GPU"])
  ]);
  var gpu = numberInput("sizing-gpu"), host = numberInput("sizing-host");
  var nominal = numberInput("sizing-nominal"), usable = numberInput("sizing-usable");
  var workspace = numberInput("sizing-workspace"), budget = numberInput("sizing-budget");
  workspace.value = "0";
  dtype.value = "fp16";
  parameters.value = "8";
  weights.value = "16";

  var separate = element("div", { "class": "sizing-group", id: "sizing-separate" }, [
    field("GPU memory (GB)", gpu), field("host memory (GB)", host)]);
  var shared = element("div", { "class": "sizing-group", id: "sizing-shared" }, [
    field("nominal memory (GB)", nominal), field("usable memory (GB)", usable, data.usable_note)]);
  var machineNote = element("p", { "class": "sizing-hint", id: "sizing-machine-note" });
  var form = element("form", { "class": "sizing-form", autocomplete: "off" }, [
    element("fieldset", {}, [element("legend", {}, ["The model"]),
      field("parameters (billions)", parameters),
      field("dtype", dtype),
      field("or its weights W (GB)", weights, "the bytes of its parameters and buffers")]),
    element("fieldset", {}, [element("legend", {}, ["The machine"]),
      field("machine", machineSelect), field("kind", kind), machineNote, separate, shared]),
    element("fieldset", {}, [element("legend", {}, ["Optional"]),
      field("workspace_size cap (GB)", workspace, "0: not counted (TensorRT may take what is free)"),
      field("cpu_memory_budget (GB)", budget, "for resource partitioning; empty: the host's memory")])
  ]);
  var answer = element("p", { "class": "sizing-answer", id: "sizing-answer", "aria-live": "polite" });
  var results = element("div", { "class": "sizing-results", id: "sizing-results" });
  root.appendChild(form);
  root.appendChild(answer);
  root.appendChild(results);
  form.addEventListener("submit", function (event) { event.preventDefault(); });

  function fromPreset() {
    var machine = byId(data.machines, machineSelect.value);
    if (!machine) return;
    kind.value = machine.kind === "shared" ? "shared" : "discrete";
    if (machine.kind === "shared") {
      nominal.value = String(machine.nominal_bytes / GB);
      usable.value = String(Math.round(machine.nominal_bytes * machine.usable_fraction / GB * 10) / 10);
    } else {
      gpu.value = String(machine.gpu_bytes / GB);
      host.value = String(machine.host_bytes / GB);
    }
    machineNote.textContent = machine.note + ".";
  }

  function currentMachine() {
    if (kind.value === "shared") {
      return { kind: "shared", usable_bytes: readGB(usable), nominal_bytes: readGB(nominal) };
    }
    return { kind: "discrete", gpu_bytes: readGB(gpu), host_bytes: readGB(host) };
  }

  function termList(result, memory, bound) {
    var phase = byId(data.phases, result.peaks[memory][bound + "_phase"]);
    var setting = byId(data.settings, result.setting);
    var sides = memory === "shared" ? ["host", "gpu"] : [memory];
    var items = [];
    sides.forEach(function (side) {
      present(data, setting, phase, side).forEach(function (term) {
        var low = value(term.low, result.variables), high = value(term.high, result.variables);
        if (high <= 0) return;
        var source = term.sources[0];
        items.push(element("li", { "data-term": term.id }, [
          element("a", { href: source.href, title: source.says || "" }, [term.name]),
          " " + span(low, high)
        ]));
      });
    });
    return element("div", { "class": "sizing-terms" }, [
      element("span", {}, ["set by " + phase.name + ":"]), element("ul", {}, items)]);
  }

  function update() {
    separate.hidden = kind.value === "shared";
    shared.hidden = kind.value !== "shared";
    var W = readGB(weights), machine = currentMachine();
    results.textContent = "";
    var limitsGiven = machine.kind === "shared" ? machine.usable_bytes != null
      : machine.gpu_bytes != null && machine.host_bytes != null;
    if (!W || !limitsGiven) {
      answer.textContent = "Give the model's size and the machine's memory.";
      return;
    }
    var ws = readGB(workspace) || 0, cap = readGB(budget);
    var best = recommend(data, W, machine, ws, cap);
    var bestName = byId(data.settings, best.setting).name;
    answer.setAttribute("data-setting", best.setting);
    answer.setAttribute("data-verdict", best.verdict);
    answer.textContent = best.verdict === "fits" || best.verdict === "may fit"
      ? "Use: " + bestName + " (" + best.verdict + ")."
      : machine.kind !== "shared" && W > machine.gpu_bytes
        ? "No setting fits: the engines alone need W = " + gb(W) + " on the GPU (see weight streaming below)."
        : "No setting fits this machine; the closest is " + bestName + ".";
    data.settings.forEach(function (setting) {
      var result = evaluate(data, setting, W, machine, ws, cap);
      var card = element("div", { "class": "sizing-result", "data-setting": setting.id,
                                  "data-verdict": result.verdict });
      var memories = machine.kind === "shared" ? ["shared"] : ["host", "gpu"];
      var labels = { host: "host", gpu: "GPU", shared: "host + GPU" };
      card.appendChild(element("p", { "class": "sizing-result-title" }, [
        element("strong", {}, [setting.name]), " ",
        element("span", { "class": "sizing-verdict" }, [result.verdict])]));
      if (result.refused) {
        card.appendChild(element("p", {}, [result.refused]));
      } else {
        memories.forEach(function (memory) {
          var peak = result.peaks[memory];
          card.setAttribute("data-" + memory + "-low", String(peak.low));
          card.setAttribute("data-" + memory + "-high", String(peak.high));
          card.appendChild(element("p", { "class": "sizing-peak", "data-memory": memory }, [
            labels[memory] + " peak " + span(peak.low, peak.high)]));
          card.appendChild(termList(result, memory, "high"));
        });
        if (setting.partitioning) {
          card.appendChild(element("p", { "class": "sizing-hint" }, [
            result.engines + " engine(s) of at most " + gb(result.S) + " of weights"]));
        }
      }
      results.appendChild(card);
    });
  }

  machineSelect.addEventListener("change", function () { fromPreset(); update(); });
  [weights, kind, gpu, host, nominal, usable, workspace, budget].forEach(function (input) {
    input.addEventListener("input", update);
    input.addEventListener("change", update);
  });
  function fromParameters() {
    var count = parseFloat(parameters.value);
    if (isFinite(count)) weights.value = String(Math.round(count * data.dtypes[dtype.value] * 1000) / 1000);
    update();
  }
  parameters.addEventListener("input", fromParameters);
  dtype.addEventListener("change", fromParameters);
  weights.addEventListener("input", function () { parameters.value = ""; });
  fromPreset();
  update();
}

if (typeof document !== "undefined") {
  var root = document.getElementById("sizing-calculator");
  var embedded = document.getElementById("memory-terms");
  if (root && embedded) build(root, JSON.parse(embedded.textContent));
}
if (typeof module !== "undefined") {
  module.exports = { evaluate: evaluate, recommend: recommend, gb: gb, span: span };
}
