"""CRM tools (WorkBench ``customer_relationship_manager.*``): search, update, add, delete.

A customer has a status in the sales pipeline, a product interest, the colleague it is
assigned to, contact and follow-up dates (ISO strings, compared as strings) and notes.
"""

from __future__ import annotations

from gymflow.environments.workplace.sandbox import Sandbox
from gymflow.environments.workplace.tools.common import contains, paginate, require

TABLE = "customer_relationship_manager_data"
UPDATABLE = (
    "customer_name",
    "assigned_to_email",
    "customer_email",
    "customer_phone",
    "last_contact_date",
    "product_interest",
    "status",
    "notes",
    "follow_up_by",
)
STATUSES = ("Qualified", "Won", "Lost", "Lead", "Proposal")
PRODUCTS = ("Software", "Hardware", "Services", "Consulting", "Training")


def customer_relationship_manager_search_customers(
    session: Sandbox,
    customer_name: str = "",
    customer_email: str = "",
    product_interest: str = "",
    status: str = "",
    assigned_to_email: str = "",
    last_contact_date_min: str = "",
    last_contact_date_max: str = "",
    follow_up_by_min: str = "",
    follow_up_by_max: str = "",
    page: int = 1,
    page_size: int = 5,
) -> dict | str:
    """Searches for customers based on the given parameters with pagination support.

    Args:
        customer_name: Name of the customer
        customer_email: Email address of the customer
        product_interest: Product interest of the customer
        status: Current status of the customer
        assigned_to_email: Email address of the person assigned to the customer
        last_contact_date_min: Minimum last contact date. Format: YYYY-MM-DD
        last_contact_date_max: Maximum last contact date. Format: YYYY-MM-DD
        follow_up_by_min: Minimum follow up date. Format: YYYY-MM-DD
        follow_up_by_max: Maximum follow up date. Format: YYYY-MM-DD
        page: Page number of results to return
        page_size: Number of customers per page
    """
    texts = {
        "customer_name": customer_name,
        "customer_email": customer_email,
        "product_interest": product_interest,
        "status": status,
        "assigned_to_email": assigned_to_email,
    }
    bounds = (
        ("last_contact_date", last_contact_date_min, last_contact_date_max),
        ("follow_up_by", follow_up_by_min, follow_up_by_max),
    )
    if not any(texts.values()) and not any(low or high for _, low, high in bounds):
        raise ValueError("No search parameters provided. Please provide at least one parameter.")
    found = []
    for customer in session.rows(TABLE):
        if not all(contains(customer[f], v) for f, v in texts.items() if v):
            continue
        # an empty date (never contacted) fails every bound, as pandas' NaN comparisons do
        if any(
            (low and not (customer[f] and customer[f] >= low))
            or (high and not (customer[f] and customer[f] <= high))
            for f, low, high in bounds
        ):
            continue
        found.append(dict(customer))
    if not found:
        return "No customers found."
    return paginate(found, page, page_size, "customers")


def customer_relationship_manager_update_customer(
    session: Sandbox, customer_id: str, field: str, new_value: str
) -> str:
    """Updates a customer record by ID.

    Args:
        customer_id: ID of the customer
        field: Field to update. Available fields are: 'customer_name', 'assigned_to_email',
            'customer_email', 'customer_phone', 'last_contact_date', 'product_interest',
            'status', 'notes', 'follow_up_by'
        new_value: New value for the field
    """
    require(customer_id, field, new_value, message="Customer ID, field, or new value not provided.")
    if field == "status" and new_value not in STATUSES:
        raise ValueError(
            "Status not valid. Please choose from: 'Qualified', 'Won', 'Lost', 'Lead', 'Proposal'"
        )
    if field == "product_interest" and new_value not in PRODUCTS:
        raise ValueError(
            "Product interest not valid. Please choose from: 'Software', 'Hardware', "
            "'Services', 'Consulting', 'Training'"
        )
    if field in ("customer_email", "assigned_to_email"):
        new_value = new_value.lower()
    if session.get(TABLE, customer_id) is None:
        raise LookupError("Customer not found.")
    if field not in UPDATABLE:  # NeMo Gym would also rewrite customer_id; an id stays an id here
        raise ValueError(
            "Field not valid. Please choose from: " + ", ".join(f"'{f}'" for f in UPDATABLE)
        )
    session.update(TABLE, customer_id, field, new_value)
    return "Customer updated successfully."


def customer_relationship_manager_add_customer(
    session: Sandbox,
    customer_name: str,
    assigned_to_email: str,
    status: str,
    customer_email: str = "",
    customer_phone: str = "",
    last_contact_date: str = "",
    product_interest: str = "",
    notes: str = "",
    follow_up_by: str = "",
) -> str:
    """Adds a new customer record.

    Args:
        customer_name: Name of the customer
        assigned_to_email: Email address of the person assigned to the customer
        status: Current status of the customer. One of: 'Qualified', 'Won', 'Lost', 'Lead',
            'Proposal'
        customer_email: Email address of the customer
        customer_phone: Phone number of the customer
        last_contact_date: The last date the customer was contacted. Format: YYYY-MM-DD
        product_interest: Product interest of the customer. One of: 'Software', 'Hardware',
            'Services', 'Consulting', 'Training'
        notes: Notes about the customer
        follow_up_by: Date for the next follow up. Format: YYYY-MM-DD
    """
    require(
        customer_name,
        assigned_to_email,
        status,
        message="Please provide all required fields: customer_name, assigned_to_email, status.",
    )
    row = {  # the column order of the CRM table
        "assigned_to_email": assigned_to_email.lower(),
        "customer_name": customer_name,
        "customer_email": customer_email.lower(),
        "customer_phone": customer_phone,
        "last_contact_date": last_contact_date,
        "product_interest": product_interest,
        "status": status,
        "follow_up_by": follow_up_by,
        "notes": notes,
    }
    return session.insert(TABLE, row)


def customer_relationship_manager_delete_customer(session: Sandbox, customer_id: str) -> str:
    """Deletes a customer record by ID.

    Args:
        customer_id: ID of the customer
    """
    require(customer_id, message="Customer ID not provided.")
    if session.get(TABLE, customer_id) is None:
        raise LookupError("Customer not found.")
    session.delete(TABLE, customer_id)
    return "Customer deleted successfully."


TOOLS = (
    customer_relationship_manager_search_customers,
    customer_relationship_manager_update_customer,
    customer_relationship_manager_add_customer,
    customer_relationship_manager_delete_customer,
)
ACTIONS = frozenset(
    {
        "customer_relationship_manager_update_customer",
        "customer_relationship_manager_add_customer",
        "customer_relationship_manager_delete_customer",
    }
)
