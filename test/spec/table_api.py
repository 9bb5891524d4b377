"""The table of 11-api-reference.txt's examples (issue 24): context, patches, check."""

from __future__ import annotations

ENTRIES = {}
