"""The context: the log, the two streams, token estimates, pruning and compaction."""

from ._compaction import CompactionConfig as CompactionConfig
from ._compaction import LLMSummarizer as LLMSummarizer
from ._compaction import Summarizer as Summarizer
from ._compaction import compact as compact
from ._compaction import context_window_of as context_window_of
from ._compaction import summarize_exchanges as summarize_exchanges
from ._prun import PrunQueue as PrunQueue
from ._prun import PrunRequest as PrunRequest
from ._streams import AgentContext as AgentContext
from ._streams import EntryState as EntryState
from ._streams import InrunEntry as InrunEntry
from ._tokens import TokenEstimator as TokenEstimator
from ._tokens import estimate_text_tokens as estimate_text_tokens
from ._tokens import estimate_tokens as estimate_tokens
from ._view import MessageView as MessageView

__all__ = [
    "AgentContext",
    "CompactionConfig",
    "EntryState",
    "InrunEntry",
    "LLMSummarizer",
    "MessageView",
    "PrunQueue",
    "PrunRequest",
    "Summarizer",
    "TokenEstimator",
    "compact",
    "context_window_of",
    "estimate_text_tokens",
    "estimate_tokens",
    "summarize_exchanges",
]
