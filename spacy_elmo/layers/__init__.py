"""thinc glue: Docs -> biLM -> ElmoOutput, and the listener contract."""
from .bilm_model import (
    ElmoBiLM,
    InferencePlan,
    apply_inference,
    bilm_weights_version,
    clear_frozen_cache,
    get_bilm,
    set_bilm,
    set_inference,
    weights_updated,
)
from .listener_protocol import ANY_UPSTREAM, UPSTREAM_ATTR, get_batch_id, is_listener_for, send_to_listeners
from .segments import doc_segments

__all__ = [
    "ANY_UPSTREAM",
    "UPSTREAM_ATTR",
    "ElmoBiLM",
    "InferencePlan",
    "apply_inference",
    "bilm_weights_version",
    "clear_frozen_cache",
    "doc_segments",
    "get_batch_id",
    "get_bilm",
    "is_listener_for",
    "send_to_listeners",
    "set_bilm",
    "set_inference",
    "weights_updated",
]
