"""Inspection: traces of named activations and the analyses built on them.

Every analysis reads its input through the model's one input pipeline (``lm.inputs``,
`glassformer.inputs`): one text or list of ids at a time, no longer than max_seq_len
(`ModelInputs.single`); an encoder-decoder's ``decoder_input`` defaults to the decoder's
start token, and text given as one is the start token followed by its tokens
(`ModelInputs.decoder_ids`). Token labels are the tokenizer's spelling (`ModelInputs.labels`).
"""

from glassformer.inspect.attention_stats import (
    attended_distance,
    attention_entropy,
    attention_patterns,
    attention_to,
    distance_profile,
    first_token_attention,
    head_pattern,
    mean_attention_entropy,
    separator_attention,
    separator_positions,
)
from glassformer.inspect.attribution import (
    Attribution,
    attention_x_gradient,
    gradient_x_input,
    integrated_gradients,
    occlusion,
)
from glassformer.inspect.embedding_geometry import (
    Neighbours,
    Projection,
    Trajectory,
    analogy,
    cosine_similarity,
    hidden_state_trajectory,
    nearest_sentences,
    nearest_tokens,
    project,
    token_embeddings,
)
from glassformer.inspect.explain_lime import lime_weights
from glassformer.inspect.explain_methods import explain_tokens
from glassformer.inspect.explain_shap import shap_values
from glassformer.inspect.explanations import (
    TextClassifier,
    label_probability,
    next_token_probability,
    sentence_similarity,
)
from glassformer.inspect.fine_tuning import AttentionShift, attention_shift
from glassformer.inspect.head_roles import (
    HeadRoles,
    first_token_scores,
    head_roles,
    induction_scores,
    positional_scores,
    previous_token_scores,
)
from glassformer.inspect.interventions import (
    AblationEffect,
    PatchEffect,
    PatchingSweep,
    ablate_head,
    head_ablation_hook,
    head_patch_hook,
    head_scale_hook,
    patch_activation,
    patching_sweep,
)
from glassformer.inspect.logit_lens import LogitLens, logit_lens, unembed
from glassformer.inspect.masked_score import MaskedScore, masked_score
from glassformer.inspect.rollout import (
    attention_flow,
    attention_rollout,
    residual_attention,
    rollout_by_layer,
)
from glassformer.inspect.targets import Target, make_target
from glassformer.nn.trace import Trace, capture

__all__ = [
    "HeadRoles",
    "LogitLens",
    "Trace",
    "attended_distance",
    "attention_entropy",
    "attention_flow",
    "attention_patterns",
    "attention_rollout",
    "attention_to",
    "capture",
    "distance_profile",
    "first_token_attention",
    "first_token_scores",
    "head_pattern",
    "head_roles",
    "induction_scores",
    "logit_lens",
    "mean_attention_entropy",
    "positional_scores",
    "previous_token_scores",
    "residual_attention",
    "rollout_by_layer",
    "separator_attention",
    "separator_positions",
    "unembed",
    # attribution, explanations (LIME, SHAP), interventions, embedding geometry
    "AblationEffect",
    "AttentionShift",
    "Attribution",
    "MaskedScore",
    "TextClassifier",
    "Neighbours",
    "PatchEffect",
    "PatchingSweep",
    "Projection",
    "Target",
    "Trajectory",
    "ablate_head",
    "analogy",
    "attention_shift",
    "attention_x_gradient",
    "cosine_similarity",
    "explain_tokens",
    "gradient_x_input",
    "head_ablation_hook",
    "head_patch_hook",
    "head_scale_hook",
    "hidden_state_trajectory",
    "integrated_gradients",
    "label_probability",
    "lime_weights",
    "make_target",
    "masked_score",
    "nearest_sentences",
    "nearest_tokens",
    "next_token_probability",
    "occlusion",
    "patch_activation",
    "patching_sweep",
    "project",
    "sentence_similarity",
    "shap_values",
    "token_embeddings",
]
