// The explorer page: a trained translator (vt-export onnx) run by onnxruntime-web, its decoding shown step by step,
// its attention and positional encoding drawn. Everything runs in the page; the server only hands out files.
import * as ort from "./lib/ort.wasm.min.mjs";
import { Tokenizer } from "./lib/tokenizers.min.mjs";
import { Translator } from "./decoding.js";

ort.env.wasm.wasmPaths = new URL("./lib/", import.meta.url).href;
ort.env.wasm.numThreads = 1; // threads need a cross-origin-isolated page, which a plain static server does not give

// {code:NAME} in a text is a link to NAME's line in code.html (the modeling file, written by vt-site build).
const TEXTS = {
  en: {
    title: "The Transformer, live",
    subtitle: "A translator trained with vanilla-transformer (Vaswani et al., 2017), running in this page: nothing is installed, nothing leaves your browser.",
    language: "Language", model: "Model",
    loading: "loading the model…", ready: "ready", failed: "could not load the model: ",
    translate: "Translate, step by step",
    "translate-paper": "§3.1: the encoder reads the sentence once; the decoder writes one token at a time, each fed back as the next input (auto-regressive). §6.1: beam search keeps the best hypotheses and divides their score by length^α. Code: {code:VanillaTransformerEncoder}, {code:VanillaTransformerDecoder}.",
    search: "Search", "search-folder": "the model's setting", "search-1": "greedy", "search-4": "beam 4",
    "translate-button": "Translate", translation: "Translation:",
    step: "step", kept: "kept", pruned: "pruned", finished: "finished", score: "score", "penalised": "÷ length^α",
    prefix: "What if the model had written…",
    "prefix-paper": "Force a target prefix and see the next-token distribution: the decoder conditions on everything written so far (§3.2.3).",
    "force-button": "Next token", "teacher-forcing": "Teacher forcing vs. serial decoding",
    "teacher-forcing-paper": "Training reads the whole target in one pass under the causal mask and predicts every position at once (§3.2.3, §5); translating feeds each token back, one at a time. Same weights, same predictions where the inputs agree. Code: {code:create_causal_mask}.",
    position: "position", input: "input", predicted: "predicted (one pass)", serial: "serial",
    attention: "Attention", "attention-paper": "§3.2.1, Eq. 1: Attention(Q, K, V) = softmax(QKᵀ/√d_k)V; §3.2.2: h heads; §3.2.3: three uses. Code: {code:VanillaTransformerAttention}, {code:eager_attention_forward}.",
    kind: "Kind", "kind-encoder": "encoder self-attention", "kind-decoder": "masked decoder self-attention", "kind-cross": "encoder-decoder attention",
    layer: "Layer", head: "Head", average: "average",
    positions: "Positional encoding", "positions-paper": "§3.5: PE(pos, 2i) = sin(pos/10000^(2i/d_model)), PE(pos, 2i+1) = cos(…); below, PE(pos)·PE(pos+k) depends on k alone. Code: {code:sinusoidal_positional_encoding}.",
    footer: "Built by vt-site from a model folder of vanilla-transformer; the code links open the modeling file this model ran.",
  },
  zh: {
    title: "Transformer，现场运行",
    subtitle: "一个用 vanilla-transformer（Vaswani 等，2017）训练的翻译模型，就在这个网页里运行：无需安装，数据不离开你的浏览器。",
    language: "语言", model: "模型",
    loading: "正在加载模型…", ready: "就绪", failed: "模型加载失败：",
    translate: "逐步翻译",
    "translate-paper": "§3.1：编码器把句子读一遍；解码器一次写一个词元，每个词元再作为下一步的输入（自回归）。§6.1：束搜索保留最好的几个假设，得分除以 长度^α。代码：{code:VanillaTransformerEncoder}、{code:VanillaTransformerDecoder}。",
    search: "搜索", "search-folder": "模型的设置", "search-1": "贪心", "search-4": "束宽 4",
    "translate-button": "翻译", translation: "译文：",
    step: "第几步", kept: "保留", pruned: "剪掉", finished: "完成", score: "得分", "penalised": "÷ 长度^α",
    prefix: "如果模型先写了……",
    "prefix-paper": "给定目标前缀，看下一个词元的分布如何变化：解码器以已写出的全部内容为条件（§3.2.3）。",
    "force-button": "下一个词元", "teacher-forcing": "教师强制 与 逐步解码",
    "teacher-forcing-paper": "训练时，整个目标句在因果掩码下一次读入，所有位置同时预测（§3.2.3、§5）；翻译时，每个词元逐个反馈。权重相同，输入一致处预测相同。代码：{code:create_causal_mask}。",
    position: "位置", input: "输入", predicted: "预测（一次前向）", serial: "逐步",
    attention: "注意力", "attention-paper": "§3.2.1，公式 1：Attention(Q, K, V) = softmax(QKᵀ/√d_k)V；§3.2.2：h 个头；§3.2.3：三种用法。代码：{code:VanillaTransformerAttention}、{code:eager_attention_forward}。",
    kind: "种类", "kind-encoder": "编码器自注意力", "kind-decoder": "带掩码的解码器自注意力", "kind-cross": "编码器-解码器注意力",
    layer: "层", head: "头", average: "平均",
    positions: "位置编码", "positions-paper": "§3.5：PE(pos, 2i) = sin(pos/10000^(2i/d_model))，PE(pos, 2i+1) = cos(…)；下图：PE(pos)·PE(pos+k) 只取决于 k。代码：{code:sinusoidal_positional_encoding}。",
    footer: "由 vt-site 从 vanilla-transformer 的模型文件夹生成；代码链接打开该模型运行的建模文件。",
  },
};

const $ = (id) => document.getElementById(id);
const state = { language: "en", translator: null, site: null, last: null };

function say(key) {
  return TEXTS[state.language][key] ?? TEXTS.en[key] ?? key;
}

function linked(text) {
  return text.replace(/\{code:(\w+)\}/g, (_, name) => {
    const line = state.site?.code?.[name];
    return line ? `<a href="code.html#L${line}" target="_blank"><code>${name}</code></a>` : `<code>${name}</code>`;
  });
}

function showTexts() {
  document.documentElement.lang = state.language === "zh" ? "zh-CN" : "en";
  for (const element of document.querySelectorAll("[data-text]")) element.innerHTML = linked(say(element.dataset.text));
  const search = $("search").options;
  search[0].textContent = `${say("search-folder")} (${state.translator?.settings.num_beams ?? "…"})`;
  search[1].textContent = say("search-1");
  search[2].textContent = say("search-4");
  $("status").textContent = say($("status").dataset.state === "ready" ? "ready" : "loading");
  fillHeads();
  if (state.last) render(state.last);
}

function fillHeads() {
  const settings = state.translator?.settings;
  if (!settings) return;
  const layers = $("kind").value === "encoder" ? settings.encoder_layers : settings.decoder_layers;
  const heads = $("kind").value === "encoder" ? settings.encoder_attention_heads : settings.decoder_attention_heads;
  const keep = (select, values) => {
    const chosen = select.value;
    select.innerHTML = values.map(([v, label]) => `<option value="${v}">${label}</option>`).join("");
    if ([...select.options].some((o) => o.value === chosen)) select.value = chosen;
  };
  keep($("layer"), Array.from({ length: layers }, (_, i) => [i, i + 1]));
  keep($("head"), [["average", say("average")], ...Array.from({ length: heads }, (_, i) => [i, i + 1])]);
}

async function loadModel(name) {
  $("status").dataset.state = "loading";
  $("status").textContent = say("loading");
  $("translate").disabled = $("force").disabled = true;
  try {
    state.translator = await Translator.load(ort, Tokenizer, `models/${encodeURIComponent(name)}`);
    $("source").value ||= state.translator.settings.example ?? "";
    $("status").dataset.state = "ready";
    document.body.dataset.readyMs ||= performance.now().toFixed(0); // since navigation started: the benchmark's figure
    $("translate").disabled = $("force").disabled = false;
    showTexts();
    drawPositions();
  } catch (error) {
    $("status").dataset.state = "error";
    $("status").textContent = say("failed") + error;
  }
}

// Translate with the chosen search; returns {text, ids, steps | beam}. Exposed for the browser test.
async function translate(text, beamsChoice) {
  const t = state.translator;
  const settings = t.settings;
  const sourceIds = t.sourceIds(text);
  if (t.readsNothing(sourceIds)) return { text: "", ids: [], sourceIds, steps: [] };
  const beams = beamsChoice === "folder" ? settings.num_beams ?? 1 : Number(beamsChoice);
  if (beams === 1) {
    const { ids, steps } = await t.greedy(sourceIds);
    return { text: t.text(ids), ids, sourceIds, steps };
  }
  const result = await t.beamSearch(sourceIds, beams, settings.length_penalty ?? 1.0, settings.early_stopping ?? false);
  return { text: t.text(result.ids), ids: result.ids, sourceIds, beam: result };
}

async function run() {
  const started = performance.now();
  const result = await translate($("source").value, $("search").value);
  result.ms = performance.now() - started;
  result.maps = await attentionMaps(result.sourceIds, result.ids.slice(1));
  state.last = result;
  render(result);
  document.body.dataset.translated = String(Number(document.body.dataset.translated ?? 0) + 1);
}

function render(result) {
  const t = state.translator;
  $("translation").textContent = result.text;
  const word = (id) => escape(t.tokens([id])[0]);
  $("steps").innerHTML = (result.steps ?? [])
    .map((step, i) => `<div class="step"><b>${say("step")} ${i + 1}</b><br>` +
      step.candidates.map((c) => `<span class="${c.id === step.chosen ? "chosen" : ""}">${word(c.id)} ${(100 * c.p).toFixed(1)}%</span>`).join("<br>") +
      "</div>")
    .join("");
  $("beam-tree").innerHTML = result.beam ? beamTree(result.beam, word) : "";
  drawAttention();
}

// The beam search as a tree (§6.1): a column per step, each candidate joined to the beam it extends; kept
// candidates go on, pruned ones stop, finished ones are scored ÷ length^α and the best of those is the translation.
function beamTree(beam, word) {
  const column = 150, row = 22, top = 18;
  const best = beam.finished[0]?.ids;
  const nodes = [{ x: 10, y: top, label: word(state.translator.settings.decoder_start_token_id), status: "kept" }];
  let beams = [0]; // node of each running beam
  const edges = [];
  beam.steps.forEach((step, s) => {
    const next = [];
    // Each beam's candidates together, in the order of the beams' places in the column before: branches never cross.
    const parents = step.candidates.map((c) => beams[c.parent] ?? 0); // each candidate's node in the column before
    const order = step.candidates.map((c, i) => i).sort((a, b) => nodes[parents[a]].y - nodes[parents[b]].y || a - b);
    order.forEach((i, rank) => {
      const c = step.candidates[i];
      const status = c.finished ? "finished" : c.kept ? "kept" : "pruned";
      const node = nodes.push({ x: 10 + (s + 1) * column, y: top + rank * row, label: `${word(c.id)} ${c.score.toFixed(2)}`, status }) - 1;
      const parent = parents[i];
      const ids = [...step.running[c.parent], c.id];
      const onBest = best && ids.length <= best.length && ids.every((id, k) => id === best[k]);
      edges.push({ from: nodes[parent], to: nodes[node], status, onBest });
      if (c.beam >= 0) next[c.beam] = node;
    });
    beams = next;
  });
  const width = 10 + (beam.steps.length + 1) * column, height = top + row * Math.max(...beam.steps.map((st) => st.candidates.length), 1);
  const lines = edges.map((e) => `<line class="${e.status}${e.onBest ? " best" : ""}" x1="${e.from.x + 96}" y1="${e.from.y - 4}" x2="${e.to.x - 4}" y2="${e.to.y - 4}"/>`);
  const labels = nodes.map((n) => `<text class="${n.status}" x="${n.x}" y="${n.y}">${n.label}</text>`);
  const legend = ["kept", "pruned", "finished"].map((k) => `<span class="${k}">${say(k)}</span>`).join(" · ");
  const final = beam.finished.filter((h) => h.done)
    .map((h) => `<li class="finished">${escape(state.translator.text(h.ids))}: ${say("score")} ${h.raw.toFixed(3)}, ${say("penalised")} ${h.score.toFixed(3)}</li>`);
  return `<p class="beam">${legend}</p><div class="tree"><svg width="${width}" height="${height}">${lines.join("")}${labels.join("")}</svg></div>` +
    `<p><b>${say("finished")}</b></p><ol class="beam">${final.join("")}</ol>`;
}

// One teacher-forced pass over the translation (as vt-visualize draws it): every attention weight.
async function attentionMaps(sourceIds, targetIds) {
  if (!sourceIds.length || !targetIds.length) return null;
  const t = state.translator;
  const target = targetIds.filter((id) => !t.settings.eos_token_ids.includes(id));
  const { encoded, out, predictions } = await t.teacherForced(sourceIds, target);
  return {
    source: t.tokens(sourceIds),
    target: t.tokens([t.settings.decoder_start_token_id, ...target]),
    encoder: encoded.attentions, decoder: out.decoderAttentions, cross: out.crossAttentions, predictions,
  };
}

function drawAttention() {
  const maps = state.last?.maps;
  const canvas = $("heatmap");
  const context = canvas.getContext("2d");
  context.clearRect(0, 0, canvas.width, canvas.height);
  if (!maps) return;
  const kind = $("kind").value;
  const tensor = maps[kind]; // (layers, 1, H, Q, K)
  const [, , heads, queries, keys] = tensor.dims;
  const layer = Number($("layer").value);
  const head = $("head").value;
  const weight = (q, k) => {
    const at = (h) => tensor.data[(((layer * heads) + h) * queries + q) * keys + k];
    if (head !== "average") return at(Number(head));
    let sum = 0;
    for (let h = 0; h < heads; h++) sum += at(h);
    return sum / heads;
  };
  const rowLabels = kind === "encoder" ? maps.source : maps.target;
  const columnLabels = kind === "cross" ? maps.source : rowLabels;
  const margin = 110, cell = Math.min(28, (canvas.width - margin) / keys, (canvas.height - margin) / queries);
  context.font = "12px sans-serif";
  for (let q = 0; q < queries; q++) {
    for (let k = 0; k < keys; k++) {
      const w = weight(q, k);
      context.fillStyle = `rgb(${255 - 200 * w}, ${255 - 120 * w}, 255)`;
      context.fillRect(margin + k * cell, margin + q * cell, cell - 1, cell - 1);
    }
    context.fillStyle = "#000";
    context.textAlign = "right";
    context.fillText(rowLabels[q] ?? "", margin - 4, margin + q * cell + cell * 0.7);
  }
  columnLabels.forEach((label, k) => {
    context.save();
    context.translate(margin + k * cell + cell * 0.7, margin - 4);
    context.rotate(-Math.PI / 3);
    context.textAlign = "left";
    context.fillText(label, 0, 0);
    context.restore();
  });
  canvas.dataset.drawn = `${kind}/${layer}/${head}`;
}

function drawPositions() {
  const width = state.translator.settings.d_model, positions = 100;
  const pe = (pos, i) => {
    const angle = pos / Math.pow(10000, (2 * Math.floor(i / 2)) / width);
    return i % 2 === 0 ? Math.sin(angle) : Math.cos(angle);
  };
  const canvas = $("pe"), context = canvas.getContext("2d");
  const cw = canvas.width / width, ch = canvas.height / positions;
  for (let pos = 0; pos < positions; pos++) {
    for (let i = 0; i < width; i++) {
      const v = (pe(pos, i) + 1) / 2;
      context.fillStyle = `rgb(${255 * v}, ${80}, ${255 * (1 - v)})`;
      context.fillRect(i * cw, pos * ch, Math.ceil(cw), Math.ceil(ch));
    }
  }
  const plot = $("pe-distance"), pc = plot.getContext("2d");
  pc.clearRect(0, 0, plot.width, plot.height);
  for (const [start, color] of [[0, "#2a5db0"], [30, "#070"], [60, "#b00"]]) {
    pc.strokeStyle = color;
    pc.beginPath();
    for (let k = 0; k < positions; k++) {
      let dot = 0;
      for (let i = 0; i < width; i++) dot += pe(start, i) * pe(start + k, i);
      const x = (k / positions) * plot.width, y = plot.height * (1 - dot / width);
      k ? pc.lineTo(x, y) : pc.moveTo(x, y);
    }
    pc.stroke();
  }
}

// "What if": the distribution of the token after a forced target prefix, and the teacher-forcing table.
async function force() {
  const t = state.translator;
  const sourceIds = t.sourceIds($("source").value);
  const prefixIds = t.tokenizer.encode(t.prepare($("prefix").value, "target"), { add_special_tokens: false }).ids;
  const { predictions } = await t.teacherForced(sourceIds, prefixIds, 10);
  $("next-tokens").innerHTML = predictions[predictions.length - 1]
    .map((c) => `<li>${escape(t.tokens([c.id])[0])} ${(100 * c.p).toFixed(1)}%</li>`).join("");
  const serial = state.last?.ids ?? [];
  const inputs = t.tokens([t.settings.decoder_start_token_id, ...prefixIds]);
  $("teacher-forcing").innerHTML = `<tr><th>${say("position")}</th><th>${say("input")}</th><th>${say("predicted")}</th><th>${say("serial")}</th></tr>` +
    predictions.map((p, i) => `<tr><td>${i}</td><td>${escape(inputs[i])}</td><td>${escape(t.tokens([p[0].id])[0])}</td><td>${escape(t.tokens([serial[i + 1] ?? -1].filter((id) => id >= 0))[0] ?? "")}</td></tr>`).join("");
  document.body.dataset.forced = String(Number(document.body.dataset.forced ?? 0) + 1);
}

function escape(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

async function main() {
  state.site = await (await fetch("site.json")).json();
  $("model").innerHTML = state.site.models.map((m) => `<option value="${escape(m.name)}">${escape(m.title)}</option>`).join("");
  state.language = navigator.language?.startsWith("zh") ? "zh" : "en";
  $("ui-language").value = state.language;
  showTexts();
  $("ui-language").addEventListener("change", () => { state.language = $("ui-language").value; showTexts(); });
  $("model").addEventListener("change", () => { state.last = null; $("source").value = ""; loadModel($("model").value); });
  $("translate").addEventListener("click", run);
  $("source").addEventListener("keydown", (event) => event.key === "Enter" && !$("translate").disabled && run());
  $("force").addEventListener("click", force);
  $("kind").addEventListener("change", () => { fillHeads(); drawAttention(); });
  for (const id of ["layer", "head"]) $(id).addEventListener("change", drawAttention);
  window.explorer = { translate: async (text, beams) => (await translate(text, String(beams))).text, state };
  await loadModel(state.site.models[0].name);
}

main();
