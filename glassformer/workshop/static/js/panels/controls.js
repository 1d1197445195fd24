// The form at the top: model, text, level and the sampling settings. It reads and shows
// settings; what they do is main.js's business (handlers passed in).

import { el } from "../core/dom.js";
import { count } from "../core/format.js";
import { parseNumber, SAMPLING_KEYS } from "../core/state.js";

const DEBOUNCE_MS = 300; // a slider sends one walk request when it rests, not one per pixel
const INTEGER_FIELDS = new Set(["top_k", "seed"]);
const SLIDERS = { temperature: "temperature-range", top_p: "top_p-range" };

function debounce(fn, ms) {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

/**
 * handlers: {onRun(), onSampling(), onLevel(level)}. Returns {setModels, show, read}.
 */
export function bindControls(form, handlers) {
  const field = (id) => form.querySelector(`#${id}`);
  const text = field("text");
  const model = field("model");
  const decoderText = field("decoder_text");
  let locked = false;

  form.addEventListener("submit", (event) => {
    event.preventDefault();
    handlers.onRun();
  });
  // Enter runs the text; Shift+Enter is a new line.
  text.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      handlers.onRun();
    }
  });
  model.addEventListener("change", () => handlers.onRun());
  decoderText.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      handlers.onRun();
    }
  });
  for (const radio of form.querySelectorAll('input[name="level"]')) {
    radio.addEventListener("change", () => handlers.onLevel(radio.value));
  }

  const sampling = debounce(() => handlers.onSampling(), DEBOUNCE_MS);
  for (const key of SAMPLING_KEYS) {
    const input = field(key);
    const slider = SLIDERS[key] ? field(SLIDERS[key]) : null;
    input.addEventListener("input", () => {
      if (slider && input.value !== "") slider.value = input.value;
      sampling();
    });
    slider?.addEventListener("input", () => {
      input.value = slider.value;
      sampling();
    });
  }

  return {
    /** Fill the model list: "label (decoder, 30 blocks, 135M)", the label the server's (a quantized model's "name · Q8_0"). */
    setModels(models, selected) {
      model.replaceChildren(
        ...models.map((m) => {
          const blocks = m.architecture.stacks.reduce((n, s) => n + s.layers, 0);
          const label = `${m.label} (${m.architecture.family.replace("_", "-")}, ${blocks} blocks, ${count(m.parameters)})`;
          return el("option", { value: m.name, selected: m.name === selected }, label);
        }),
      );
    },
    /** Sampling only matters to a model that predicts a next token. */
    setGenerates(generates) {
      const fieldset = form.querySelector("#sampling");
      fieldset.disabled = !generates || locked;
      form.querySelector("#sampling-note").textContent = generates ? "" : "this model does not generate: no sampling";
    },
    /** An encoder-decoder's decoder reads a text of its own. */
    setSeq2seq(seq2seq) {
      form.querySelector("#decoder-row").hidden = !seq2seq;
    },
    /** Teaching mode: everything but the level hidden and disabled (style.css hides .lockable). */
    setLocked(lock) {
      locked = lock;
      form.dataset.locked = lock ? "true" : "";
      const nodes = form.querySelectorAll(".lockable, .lockable :is(input, select, textarea, button)");
      for (const node of nodes) if ("disabled" in node) node.disabled = lock;
      form.querySelector("#lock-badge").hidden = !lock;
      form.querySelector("#prompt-shown").hidden = !lock; // the class sees the prompt, not a text box
    },
    /** Put ``settings`` in the form. */
    show(settings) {
      model.value = settings.model;
      text.value = settings.text;
      form.querySelector("#prompt-shown").textContent = settings.text;
      decoderText.value = settings.decoder_text;
      for (const radio of form.querySelectorAll('input[name="level"]')) radio.checked = radio.value === settings.level;
      for (const key of SAMPLING_KEYS) {
        const value = settings[key];
        field(key).value = value === null ? "" : String(value);
        if (SLIDERS[key] && value !== null) field(SLIDERS[key]).value = String(value);
      }
    },
    /** The form's settings (a sampling field left empty is null: the server's default or off). */
    read() {
      const out = { model: model.value, text: text.value, decoder_text: decoderText.value };
      for (const key of SAMPLING_KEYS) {
        const value = parseNumber(field(key).value, INTEGER_FIELDS.has(key));
        out[key] = Number.isNaN(value) ? field(key).value : value; // the server names a bad value
      }
      return out;
    },
  };
}
