"""The dashboard screen and the modal views opened from it."""
