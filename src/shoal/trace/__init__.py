"""Reading timelines that ``shoal run --trace`` wrote: ``shoal trace summary`` (a table),
``plot`` (a PNG) and ``report`` (one self-contained HTML page of every view). See docs/tracing.md."""

__all__: list[str] = []
