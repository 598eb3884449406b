"""MPA: model-based policy adaptation for end-to-end driving (papers.md, issue 8). See README.md."""
