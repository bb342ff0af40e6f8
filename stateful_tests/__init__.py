"""The stateful verification suite (CIS-STATE-1, CIS-STATE-2)."""
