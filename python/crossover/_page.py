"""A job's report page inline in a notebook: its headline, then report.html from its folder."""
import html
import os


def report_html(folder, headline):
    """`headline` (plain text) in bold above the folder's report.html in an iframe; the headline
    alone where the page is not there."""
    line = html.escape(headline)
    try:
        with open(os.path.join(folder, "report.html"), encoding="utf-8") as f:
            body = f.read()
    except OSError:
        return f"<p>{line}</p>"
    return (f"<p><b>{line}</b></p><iframe srcdoc=\"{html.escape(body)}\" "
            "style=\"width:100%;height:640px;border:0\"></iframe>")
