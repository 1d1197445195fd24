// The overview's zoom as the page store and the URL hold it (settings.zoom), a string:
//   ""                  the whole model
//   "blocks.3"          one block: its group
//   "blocks.3.attn:2"   head 2 of an attention: the attention's name (attentionName), the head
//   "blocks.3.attn:2:5" the same, query 5 chosen
// (an encoder-decoder's cross-attention: "decoder.blocks.1.cross_attn:0"). This module is its
// one reader and writer. A zoom is read by matching the payload's stages (their group, kind
// and cross), never by taking a stage's name apart; the page draws from the object it reads:
// {block: a group or "", pattern: the attention weights' step or null, head, query}.

/** An attention's name in a zoom: its block's group, then "attn" or "cross_attn". */
export function attentionName(pattern) {
  return `${pattern.group}.${pattern.cross ? "cross_attn" : "attn"}`;
}

const index = (text) => (text !== undefined && /^\d+$/.test(text) ? Number(text) : null);

/** A zoom's text read against the walk's stages. */
export function readZoom(text, stages) {
  const [path = "", head, query] = (text ?? "").split(":");
  const pattern = path ? stages.find((s) => s.kind === "attn.pattern" && attentionName(s) === path) : null;
  if (!pattern) return { block: path, pattern: null, head: null, query: null };
  return { block: pattern.group, pattern, head: index(head) ?? 0, query: index(query) };
}

/** The text of a zoom: {block} alone, or {pattern, head, query} (query null: none chosen). */
export function zoomText({ block = "", pattern = null, head = 0, query = null }) {
  if (!pattern) return block;
  return `${attentionName(pattern)}:${head}${query === null ? "" : `:${query}`}`;
}
