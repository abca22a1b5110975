"""The conversation and entity graph: turn order within sessions, entities and their relations.

- ``entities``: the ``EntityExtractor`` Protocol and the built-in offline extractor.
- ``extractors``: optional stronger extractors (spaCy, an LLM) and the choice by settings.
"""
