"""Email tools (WorkBench ``email.*``, NeMo Gym ``email_*``): read, search, send, delete,
forward and reply. Sent mail joins the table as an ``outbox`` record dated :data:`NOW`."""

from __future__ import annotations

from gymflow.environments.workplace.sandbox import Sandbox
from gymflow.environments.workplace.tools.common import NOW, paginate, parse_time, require

TABLE = "emails"
FIELDS = ("email_id", "inbox/outbox", "sender/recipient", "subject", "sent_datetime", "body")


def email_get_email_information_by_id(session: Sandbox, email_id: str, field: str) -> dict:
    """Retrieves specific details of an email by its ID.

    Args:
        email_id: Unique ID of the email
        field: Specific field to return. Available fields: 'email_id', 'inbox/outbox',
            'sender/recipient', 'subject', 'sent_datetime', 'body'
    """
    require(email_id, message="Email ID not provided.")
    require(field, message="Field not provided.")
    email = session.get(TABLE, email_id)
    if email is None:
        raise LookupError("Email not found.")
    if field not in email:
        raise ValueError(f"Field '{field}' not found. Available fields: {', '.join(FIELDS)}")
    return {field: email[field]}


def email_search_emails(
    session: Sandbox,
    query: str = "",
    date_min: str = "",
    date_max: str = "",
    page: int = 1,
    page_size: int = 5,
) -> dict | str:
    """Searches for emails matching the given query across subject, body, or sender fields.
    The function matches an email if all words in the query appear in any of these fields.

    Args:
        query: Search query, matching terms in subject, body, or sender/recipient fields
        date_min: Lower date limit for the email's sent date (inclusive). Format: YYYY-MM-DD
        date_max: Upper date limit for the email's sent date (inclusive). Format: YYYY-MM-DD
        page: Page number of results to return
        page_size: Number of emails per page
    """
    words = query.lower().split()
    # compared as ISO strings: the table's "YYYY-MM-DD HH:MM:SS" sorts like the dates it names
    low = parse_time(date_min, "date_min").date().isoformat() if date_min else ""
    high = parse_time(date_max, "date_max").date().isoformat() if date_max else ""
    found = []
    for email in session.rows(TABLE):
        text = f"{email['subject']} {email['body']} {email['sender/recipient']}".lower()
        if not all(word in text for word in words):
            continue
        day = email["sent_datetime"][:10]
        if (low and day < low) or (high and day > high):
            continue
        found.append(dict(email))
    if not found:
        return "No emails found."
    found.sort(key=lambda e: e["sent_datetime"], reverse=True)
    return paginate(found, page, page_size, "emails")


def email_send_email(session: Sandbox, recipient: str, subject: str, body: str) -> str:
    """Sends an email to the specified recipient.

    Args:
        recipient: Email address of the recipient
        subject: Subject line of the email
        body: Body content of the email
    """
    require(recipient, subject, body, message="Recipient, subject, or body not provided.")
    if "@" not in recipient or "." not in recipient:
        raise ValueError("Invalid recipient email address.")
    row = {
        "inbox/outbox": "outbox",
        "sender/recipient": recipient.lower(),
        "subject": subject,
        "sent_datetime": NOW,
        "body": body,
    }
    session.insert(TABLE, row, pad=False)  # WorkBench's new email ids are not zero-padded
    return "Email sent successfully."


def email_delete_email(session: Sandbox, email_id: str) -> str:
    """Deletes an email by its ID.

    Args:
        email_id: Unique ID of the email to be deleted
    """
    require(email_id, message="Email ID not provided.")
    if session.get(TABLE, email_id) is None:
        raise LookupError("Email not found.")
    session.delete(TABLE, email_id)
    return "Email deleted successfully."


def email_forward_email(session: Sandbox, email_id: str, recipient: str) -> str:
    """Forwards an email to the specified recipient.

    Args:
        email_id: Unique ID of the email to be forwarded
        recipient: Email address of the recipient
    """
    require(email_id, recipient, message="Email ID or recipient not provided.")
    if "@" not in recipient or "." not in recipient:
        raise ValueError("Invalid recipient email address.")
    email = session.get(TABLE, email_id)
    if email is None:
        raise LookupError("Email not found.")
    email_send_email(session, recipient, f"FW: {email['subject']}", email["body"])
    return "Email forwarded successfully."


def email_reply_email(session: Sandbox, email_id: str, body: str) -> str:
    """Replies to an email by its ID.

    Args:
        email_id: Unique ID of the email to be replied
        body: Body content of the email
    """
    require(email_id, body, message="Email ID or body not provided.")
    email = session.get(TABLE, email_id)
    if email is None:
        raise LookupError("Email not found.")
    email_send_email(session, email["sender/recipient"], f"RE: {email['subject']}", body)
    return "Email replied successfully."


TOOLS = (
    email_get_email_information_by_id,
    email_search_emails,
    email_send_email,
    email_delete_email,
    email_forward_email,
    email_reply_email,
)
ACTIONS = frozenset(
    {"email_send_email", "email_delete_email", "email_forward_email", "email_reply_email"}
)
