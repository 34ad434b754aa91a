"""Explaining a trace: the glossary of equations and the renderers (terminal text, JSON)."""
