"""The tridiagonal solver's stream-count models."""
