// A source entry point: TypeScript, a relative import and a node_modules dependency.
import { formatCents } from "tiny-money";
import { findOrder, type Order } from "./lib/orders";

export async function listOrders(input: { user: string }): Promise<Order[]> {
  return [findOrder("o1", input.user)];
}

export async function refundOrder(input: { item: Order }) {
  return { refunded: formatCents(input.item.amount) };
}

export const version = "1.0.0";
