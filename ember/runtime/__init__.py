"""ember.runtime: devices, kernel loading and launching, caches, timers."""
