"""The paper's fine-tuning mix as a cached stage output: sources (sources.py), download / build / load (build.py)."""

from .build import MixSpec, build, download, load_packed, select_documents
from .sources import SOURCES, Source, get_source

__all__ = ["MixSpec", "build", "download", "load_packed", "select_documents", "SOURCES", "Source", "get_source"]
