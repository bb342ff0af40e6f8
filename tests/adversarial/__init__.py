"""Adversarial tests: each documents one defect found by attacking the system (xfail until fixed)."""
