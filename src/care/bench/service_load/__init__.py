"""``care bench service-load``: ``care serve`` over HTTP against the bare encode + search + lookup loop, in one run.

:mod:`.config` holds the typed settings, :mod:`.client` the light HTTP clients, :mod:`.services` the services in
child processes, :mod:`.measure` the measurements (one client interleaved with the bare loop; a throughput curve
against the bare loop's ceiling), :mod:`.report` the record and its markdown, :mod:`.index_folder` a servable index
folder over a vectors file (the million-vector set of :mod:`care.bench.search_1m`), :mod:`.cli` the command.
"""
