"""The PDF reader: the worker that reads PDFium's text, and the pure layout that orders it."""
