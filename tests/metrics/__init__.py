"""The Prometheus exporter (gputui.metrics), alone and scraped by a real Prometheus."""
