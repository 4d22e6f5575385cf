"""The app's rendering core: frames → view model, reveal, incremental Markdown. No Textual here."""
