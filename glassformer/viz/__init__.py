"""Views of what a model computes: figures, projections and interactive HTML views.

The HTML views (`glassformer.viz.html`) are self-contained: our own JS and CSS, inlined,
nothing loaded from the network. Each shows inline in Jupyter and saves as one file.
"""

# Interactive HTML views (head, model, neuron, token): glassformer/viz/*_view*.py + assets/
# Static figures (matplotlib: PNG, SVG) and Plotly views: viz/figures.py, viz/projection.py
from glassformer.viz.attention_views import HeadView as HeadView
from glassformer.viz.attention_views import ModelView as ModelView
from glassformer.viz.figures import attention_between as attention_between
from glassformer.viz.figures import attention_grid as attention_grid
from glassformer.viz.figures import attention_heatmap as attention_heatmap
from glassformer.viz.figures import attribution_bars as attribution_bars
from glassformer.viz.figures import entropy_per_head as entropy_per_head
from glassformer.viz.figures import logit_lens_table as logit_lens_table
from glassformer.viz.figures import save as save
from glassformer.viz.neuron_view import NeuronView as NeuronView
from glassformer.viz.projection import embedding_projection_3d as embedding_projection_3d
from glassformer.viz.projection import hidden_state_animation as hidden_state_animation
from glassformer.viz.projection import layer_animation as layer_animation
from glassformer.viz.projection import save_html as save_html
from glassformer.viz.token_view import TokenView as TokenView
