"""Reading the three H&M CSV files (``.csv`` or ``.csv.gz``) into typed tables, with one-line errors."""
