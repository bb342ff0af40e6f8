"""Tests of the pure kernel: examples, hostile inputs, properties and the spec table."""
