// One stage's whole tensor (/api/stage), asked once per pass input and stage: the opened
// steps, the overview and the attention lines share it.

import { fetchStage } from "../core/api.js";
import { showMessage } from "../core/page_status.js";
import { state } from "../core/state.js";

const stageTensors = new Map(); // pass input, trace name, exact -> Promise of /api/stage's answer

/** The tensor of the stage traced as ``name`` in the walk drawn now (``exact``: attention
 * weights as float32, for a table, not as bytes). */
export function loadStage(name, exact = false) {
  const { walk } = state.get();
  const key = `${walk.inputKey}\n${name}\n${exact}`;
  if (!stageTensors.has(key)) {
    const request = fetchStage(walk.input, name, exact);
    request.catch((error) => {
      stageTensors.delete(key);
      showMessage(error.message);
    });
    stageTensors.set(key, request);
  }
  return stageTensors.get(key);
}
