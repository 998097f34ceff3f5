// Examples of the OpenAPI document, taken from the demo data (`storefront seed --demo --seed 42 --until
// 2026-11-23`, the first customer with a chat account, reviews and completed invoices; lists shortened).
// test/platform/ops/openapi.test.ts checks that each one still validates against its schema.
const invoice = {
  id: "inv_gfkb1nrgnd7d8hwv9shy",
  totalInUsd: 457.64,
  paymentMethod: "stripe",
  displayedPaymentInfo: "American Express •••• 8428",
  createdOnSessionId: "ses_3c9t569mjgwvhx5c2kr4",
  leftFeedback: false,
  status: "completed",
  createdAt: "2026-11-17T11:53:13.272Z",
};

export const OPENAPI_EXAMPLES: Record<string, unknown> = {
  CustomerInvoice: invoice,
  Customer: {
    id: "cus_jfedb73s1t8vbe8ft7kn",
    totalOrders: 3,
    lastOrderDate: "2026-11-17T11:53:13.272Z",
    firstOrderDate: "2026-11-06T16:44:05.521Z",
    totalSpent: 1056.94,
    email: "deonz196@gmail.com",
    createdAt: "2026-11-03T20:21:12.330Z",
    storeCustomerDiscordAccount: { discordId: "628034225008455397", email: "deonz196@gmail.com" },
    reviews: [
      {
        id: "rev_6jjnjzmxcvy5tpzv75xf",
        rating: 5,
        text: "Best purchase this year. Checkout was smooth.",
        productId: "prod_ngjhxbhmgnm2nkbtw81z",
        createdAt: "2026-11-14T13:59:36.018Z",
      },
    ],
    customerSessions: [
      {
        ip: "23.132.106.198",
        userAgent: "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/570.7.68 (KHTML, like Gecko) Version/16.1 Safari/571.76.48",
        country: "FR",
        lastUsedAt: "2026-11-22T16:11:01.551Z",
        createdAt: "2026-11-14T14:39:17.027Z",
      },
    ],
    invoices: [
      {
        id: "inv_zn9b4eb5vspetbb8z1bp",
        totalInUsd: 284.13,
        paymentMethod: "paypal",
        displayedPaymentInfo: "PayPal d***@gmail.com",
        createdOnSessionId: "ses_3c9t569mjgwvhx5c2kr4",
        leftFeedback: false,
        status: "expired",
        createdAt: "2026-11-22T19:01:27.955Z",
      },
      invoice,
    ],
  },
  Invoice: {
    ...invoice,
    customerId: "cus_jfedb73s1t8vbe8ft7kn",
    discordAccount: null,
    invoiceFields: [
      { key: "Number of seats", value: "8", type: "number" },
      { key: "Order notes", value: "Pax solitudo bene comparo acer amitto celo aedificium.", type: "textarea" },
    ],
    invoiceItems: [
      { productVariantId: "var_9d8hrm6p3y67v0xacbtp", quantity: 1, price: 100.49, couponId: null },
      { productVariantId: "var_s9zhqykz0bsd4d89dj0x", quantity: 1, price: 357.15, couponId: null },
    ],
    invoiceLogs: [
      { log: "Invoice created (pending)", type: "info", createdAt: "2026-11-17T11:53:13.272Z" },
      { log: "Payment confirmed by the provider (completed)", type: "info", createdAt: "2026-11-17T11:57:22.660Z" },
    ],
  },
  Error: {
    error: {
      code: "invalid_request",
      message: 'createdAtFrom must be an ISO 8601 date-time with Z or an offset (2023-06-15T14:30:00Z) or a date (2023-06-15), got "yesterday"',
      requestId: "5f0c1d7e-9a4b-4c8e-b1f2-3d6a7e8c9b0a",
      param: "createdAtFrom",
    },
  },
};

/** Request bodies by operationId, from the same demo data (test/platform/ops/openapi.test.ts sends each one). */
export const REQUEST_EXAMPLES: Record<string, unknown> = {
  createStore: { name: "Bradtke, Powlowski and Breitenberg" },
  createKey: { scopes: ["customers:read", "invoices:read"], name: "storefront backend" },
  createCustomer: { email: "deonz196@gmail.com", discordId: "628034225008455397", discordEmail: "deonz196@gmail.com" },
  createInvoice: {
    customerId: "cus_jfedb73s1t8vbe8ft7kn",
    paymentMethod: "stripe",
    displayedPaymentInfo: "American Express •••• 8428",
    items: [
      { productVariantId: "var_9d8hrm6p3y67v0xacbtp", quantity: 1, price: 100.49 },
      { productVariantId: "var_s9zhqykz0bsd4d89dj0x", quantity: 1, price: 357.15 },
    ],
    fields: [{ key: "Number of seats", value: "8", type: "number" }],
  },
  putPlugin: { catalog: "stripe", secrets: { signingSecret: "whsec_…" }, enabled: true },
  simulatePlugin: {
    body: '{"id":"evt_1","type":"checkout.session.completed","data":{"object":{"metadata":{"invoiceId":"inv_gfkb1nrgnd7d8hwv9shy"}}}}',
    headers: { "stripe-signature": "t=1763380633,v1=…" },
  },
  cancelInvoice: { reason: "Customer asked to cancel" },
  refundInvoice: { reason: "Refunded in the Stripe dashboard" },
};
