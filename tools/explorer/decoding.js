// An exported model (vt-export onnx) in the browser: its encoder, its decoder step, and generate()'s greedy and beam
// searches for one sentence, step for step as transformers 5.x runs them (generation/utils.py, _beam_search), so
// that the page gives the tokens that model.generate() gives with the folder's generation_config.json.

import { mosesTokenizer } from "./moses.js";

const NEG = -1.0e9; // transformers' "never choose this" score
const f32 = Math.fround; // transformers adds and divides float32 scores: so does this file

export class Translator {
  constructor(ort, tokenizer, encoder, decoder, settings) {
    Object.assign(this, { ort, tokenizer, encoder, decoder, settings });
  }

  static async load(ort, Tokenizer, base) {
    const json = async (name) => (await fetch(`${base}/${name}`)).json();
    const settings = await json("explorer.json");
    const tokenizer = new Tokenizer(await json("tokenizer.json"), await json("tokenizer_config.json"));
    // Both graphs read their weights from one file (vt-export onnx stores the shared embedding once): fetched once.
    const weights = new Uint8Array(await (await fetch(`${base}/weights.onnx_data`)).arrayBuffer());
    const options = { executionProviders: ["wasm"], externalData: [{ path: "weights.onnx_data", data: weights }] };
    const encoder = await ort.InferenceSession.create(`${base}/encoder.onnx`, options);
    const decoder = await ort.InferenceSession.create(`${base}/decoder.onnx`, options);
    return new Translator(ort, tokenizer, encoder, decoder, settings);
  }

  // What training did to a `side` ("source" or "target") sentence before the vocabulary saw it
  // (pipeline_vanilla_transformer.text_preparation): nothing, or lowercasing and sacremoses' Moses tokenization.
  prepare(text, side = "source") {
    if (this.settings.text_preprocessing !== "lowercase_tokenized") return text;
    this.moses ??= {};
    this.moses[side] ??= mosesTokenizer(this.settings.moses[side]);
    return this.moses[side](text.toLowerCase());
  }

  sourceIds(text) {
    return this.tokenizer.encode(this.prepare(text)).ids;
  }

  // The vocabulary's pieces, "▁" marking the start of a word (sentencepiece's mark, §5.1's byte-pair encoding).
  tokens(ids) {
    return ids.map((id) => this.tokenizer.id_to_token(id) ?? String(id));
  }

  text(ids) {
    const { clean_up_tokenization_spaces } = this.settings;
    return this.tokenizer.decode(ids, { skip_special_tokens: true, clean_up_tokenization_spaces }).trim();
  }

  // A source that gives the model no token but its end translates to "" (pipeline_vanilla_transformer.reads_nothing).
  readsNothing(ids) {
    const { eos_token_ids, bos_token_id, pad_token_id } = this.settings;
    return ids.every((id) => eos_token_ids.includes(id) || id === bos_token_id || id === pad_token_id);
  }

  int64(rows) {
    const flat = BigInt64Array.from(rows.flat().map((id) => BigInt(id)));
    return new this.ort.Tensor("int64", flat, [rows.length, rows[0].length]);
  }

  // §3.1 The encoder, run once per sentence: its output (repeated for `copies` beams) and self-attention weights.
  async encode(ids, copies = 1) {
    const out = await this.encoder.run({ input_ids: this.int64([ids]), attention_mask: this.int64([ids.map(() => 1)]) });
    const states = out.last_hidden_state;
    const repeated = new Float32Array(states.data.length * copies);
    for (let c = 0; c < copies; c++) repeated.set(states.data, c * states.data.length);
    return {
      states: new this.ort.Tensor("float32", repeated, [copies, ...states.dims.slice(1)]),
      mask: this.int64(Array.from({ length: copies }, () => ids.map(() => 1))),
      attentions: out.encoder_attentions, // (layers, 1, H, S, S)
    };
  }

  emptyPast(batch) {
    const { decoder_layers: layers, decoder_attention_heads: heads, d_model: width } = this.settings;
    const empty = () => new this.ort.Tensor("float32", new Float32Array(0), [batch, heads, 0, width / heads]);
    return Array.from({ length: layers }, () => [empty(), empty()]);
  }

  // The decoder on `rows` (B rows of T new tokens) after `past` (per layer [keys, values], B x H x P x D/H).
  async decode(rows, encoded, past) {
    const feeds = { input_ids: this.int64(rows), encoder_attention_mask: encoded.mask, encoder_hidden_states: encoded.states };
    past.forEach(([keys, values], i) => {
      feeds[`past_key_values.${i}.decoder.key`] = keys;
      feeds[`past_key_values.${i}.decoder.value`] = values;
    });
    const out = await this.decoder.run(feeds);
    const present = past.map((_, i) => [out[`present.${i}.decoder.key`], out[`present.${i}.decoder.value`]]);
    return { logits: out.logits, present, decoderAttentions: out.decoder_attentions, crossAttentions: out.cross_attentions };
  }

  // Row `row`, position `position` of a (B, T, V) logits tensor, as log-probabilities (float32, as torch's).
  logProbabilities(logits, row, position) {
    const [, length, vocab] = logits.dims;
    const start = (row * length + position) * vocab;
    const logp = logSoftmax(logits.data.subarray(start, start + vocab));
    // Tokens the model never writes (generation_config.json's suppress_tokens), as transformers suppresses them:
    // after the log-softmax, then (renormalize_logits) a log-softmax over the rest.
    const { suppress_tokens: suppressed = [], renormalize_logits: renormalize = false } = this.settings;
    for (const id of suppressed) logp[id] = -Infinity;
    return renormalize && suppressed.length ? logSoftmax(logp) : logp;
  }

  maxNewTokens(sourceLength) {
    const { max_new_tokens, max_length_beyond_source } = this.settings;
    return max_new_tokens ?? sourceLength + (max_length_beyond_source ?? 50); // §6.1: input length + 50
  }

  // Greedy search: the most probable token at every step. Returns the ids and, per step, the top candidates.
  async greedy(sourceIds, top = 5) {
    const { decoder_start_token_id: start, eos_token_ids: ends } = this.settings;
    const encoded = await this.encode(sourceIds);
    const maxLength = 1 + this.maxNewTokens(sourceIds.length);
    const ids = [start];
    const steps = [];
    let past = this.emptyPast(1);
    let input = [start];
    while (ids.length < maxLength) {
      const out = await this.decode([input], encoded, past);
      past = out.present;
      const logp = this.logProbabilities(out.logits, 0, input.length - 1);
      const next = argmax(logp);
      steps.push({ chosen: next, candidates: topK(logp, top).map(([id, lp]) => ({ id, p: Math.exp(lp) })) });
      ids.push(next);
      input = [next];
      if (ends.includes(next)) break;
    }
    return { ids, steps };
  }

  // Beam search as transformers 5.x runs it for one sentence: 2 x beams candidates a step, the best `beams` that do
  // not end go on, those that end among the best `beams` are finished with score / length^length_penalty, and the
  // search stops as early_stopping says. Returns the best finished ids, all finished ones, and each step's candidates.
  async beamSearch(sourceIds, beams, lengthPenalty, earlyStopping) {
    const { decoder_start_token_id: start, eos_token_ids: ends } = this.settings;
    const encoded = await this.encode(sourceIds, beams);
    const maxLength = 1 + this.maxNewTokens(sourceIds.length);
    const keep = Math.max(2, 1 + ends.length) * beams;
    const promptLength = 1;
    let running = Array.from({ length: beams }, () => [start]);
    let runningScores = running.map((_, b) => (b === 0 ? 0 : NEG));
    let finished = Array.from({ length: beams }, () => ({ ids: [start], score: NEG, done: false }));
    let improvable = true;
    let length = 1;
    let past = this.emptyPast(beams);
    let input = running.map((ids) => ids.slice());
    const steps = [];
    for (;;) {
      const out = await this.decode(input, encoded, past);
      const vocab = out.logits.dims[2];
      const accumulated = new Float32Array(beams * vocab);
      for (let b = 0; b < beams; b++) {
        const logp = this.logProbabilities(out.logits, b, input[b].length - 1);
        for (let v = 0; v < vocab; v++) accumulated[b * vocab + v] = f32(logp[v] + runningScores[b]);
      }
      const candidates = topK(accumulated, keep).map(([index, score]) => {
        const beam = Math.floor(index / vocab);
        const id = index % vocab;
        return { beam, id, score, ids: [...running[beam], id], ends: ends.includes(id) || length + 1 >= maxLength };
      });
      // The beams that go on: the best `beams` candidates that did not end.
      const next = candidates
        .map((c, i) => ({ c, i, score: c.ends ? f32(c.score + NEG) : c.score }))
        .sort((a, b) => b.score - a.score || a.i - b.i)
        .slice(0, beams);
      // The finished ones: candidates among the best `beams` that ended, with the length penalty (§6.1: alpha).
      const allDone = finished.every((h) => h.done);
      const merged = [
        ...finished,
        ...candidates.map((c, i) => {
          const justFinished = c.ends && i < beams;
          let score = f32(c.score / Math.pow(length + 1 - promptLength, lengthPenalty));
          if (allDone && earlyStopping === true) score = f32(score + NEG);
          if (!improvable) score = f32(score + NEG);
          if (!justFinished) score = f32(score + NEG);
          return { ids: c.ids, score, done: justFinished, raw: c.score };
        }),
      ];
      finished = merged
        .map((h, i) => ({ h, i }))
        .sort((a, b) => b.h.score - a.h.score || a.i - b.i)
        .slice(0, beams)
        .map(({ h }) => h);
      steps.push({
        candidates: candidates.map((c, i) => {
          const beam = next.findIndex((n) => n.i === i); // the running beam it becomes at the next step (-1: none)
          const done = finished.some((h) => h.ids === c.ids);
          return { parent: c.beam, id: c.id, score: c.score, ends: c.ends, kept: beam >= 0, beam, finished: done };
        }),
        running: running.map((ids) => ids.slice()),
      });
      // Reorder the cache to the beams that go on, and feed each its new token.
      const order = next.map((n) => n.c.beam);
      past = out.present.map(([keys, values]) => [gatherRows(this.ort, keys, order), gatherRows(this.ort, values, order)]);
      running = next.map((n) => n.c.ids);
      runningScores = next.map((n) => n.score);
      input = running.map((ids) => [ids[ids.length - 1]]);
      length += 1;
      // Can a running beam still beat the worst finished one?
      const hypothetical = earlyStopping === "never" && lengthPenalty > 0 ? maxLength - promptLength : length - promptLength;
      const best = f32(runningScores[0] / Math.pow(hypothetical, lengthPenalty));
      const worst = Math.min(...finished.map((h) => h.score));
      improvable = improvable && finished.some((h) => best > (h.done ? worst : NEG));
      const open = !(finished.every((h) => h.done) && earlyStopping === true);
      const continuable = !candidates.every((c) => c.ends);
      if (!(improvable && open && continuable)) break;
    }
    return { ids: finished[0].ids, finished, steps };
  }

  // Teacher forcing (§3.2.3): the whole target read in one pass under the causal mask; every position's prediction.
  async teacherForced(sourceIds, targetIds, top = 5) {
    const encoded = await this.encode(sourceIds);
    const rows = [[this.settings.decoder_start_token_id, ...targetIds]];
    const out = await this.decode(rows, encoded, this.emptyPast(1));
    const predictions = rows[0].map((_, t) => topK(this.logProbabilities(out.logits, 0, t), top).map(([id, lp]) => ({ id, p: Math.exp(lp) })));
    return { encoded, out, predictions };
  }
}

// The log-softmax of float32 values, as torch's.
function logSoftmax(values) {
  let max = -Infinity;
  for (const v of values) max = Math.max(max, v);
  let sum = 0;
  for (const v of values) sum += Math.exp(v - max);
  const logSum = max + Math.log(sum);
  return Float32Array.from(values, (v) => v - logSum);
}

export function argmax(values) {
  let best = 0;
  for (let i = 1; i < values.length; i++) if (values[i] > values[best]) best = i;
  return best;
}

// The k largest values as [index, value], largest first (ties: lower index first).
export function topK(values, k) {
  const best = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (best.length < k || v > best[best.length - 1][1]) {
      let at = best.length;
      while (at > 0 && best[at - 1][1] < v) at--;
      best.splice(at, 0, [i, v]);
      if (best.length > k) best.pop();
    }
  }
  return best;
}

// Rows `order` of a (B, ...) float32 tensor: the cache of the beams that go on.
function gatherRows(ort, tensor, order) {
  const rowSize = tensor.data.length / tensor.dims[0];
  const data = new Float32Array(order.length * rowSize);
  order.forEach((row, i) => data.set(tensor.data.subarray(row * rowSize, (row + 1) * rowSize), i * rowSize));
  return new ort.Tensor("float32", data, [order.length, ...tensor.dims.slice(1)]);
}
