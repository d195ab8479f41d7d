"""The Textual dashboard (PRODUCT.md section 5). Entry point: `amptui.dashboard.app.make_app`."""
