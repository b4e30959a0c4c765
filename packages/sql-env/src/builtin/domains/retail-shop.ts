import type { DomainSpec, RowData, TableSpec } from '../domain-spec.ts';
import { addDays, randomDate } from '../dates.ts';
import type { Mulberry32 } from '@sqlenv/shared';
import { emailFor, STANDARD_VOCABULARY, uniqueNames, type Vocabulary } from '../vocabulary.ts';
import { retailShopTemplates } from './retail-shop-questions.ts';

/**
 * An online shop. This is the domain whose identifiers need quoting: the
 * table "Order Items" has a space, the columns "group" and "order" are SQL
 * keywords, and every name is MixedCase, so the environment's DESCRIBE /
 * SAMPLE quoting is exercised on real data.
 */
const tables: readonly TableSpec[] = [
  {
    name: 'Customers',
    columns: [
      { name: 'CustomerId', type: 'INTEGER', primaryKey: true },
      { name: 'FirstName', type: 'TEXT' },
      { name: 'LastName', type: 'TEXT' },
      { name: 'Email', type: 'TEXT', nullable: true },
      { name: 'City', type: 'TEXT' },
      { name: 'Country', type: 'TEXT' },
      { name: 'JoinedOn', type: 'TEXT', temporal: true },
    ],
  },
  {
    name: 'Products',
    columns: [
      { name: 'ProductId', type: 'INTEGER', primaryKey: true },
      { name: 'Name', type: 'TEXT' },
      { name: 'group', type: 'TEXT' },
      { name: 'UnitPrice', type: 'REAL' },
      { name: 'StockLevel', type: 'INTEGER' },
      { name: 'Discontinued', type: 'INTEGER' },
    ],
  },
  {
    name: 'Orders',
    columns: [
      { name: 'OrderId', type: 'INTEGER', primaryKey: true },
      { name: 'CustomerId', type: 'INTEGER', references: { table: 'Customers', column: 'CustomerId' } },
      { name: 'OrderDate', type: 'TEXT', temporal: true },
      { name: 'Status', type: 'TEXT' },
      { name: 'ShippingCost', type: 'REAL' },
    ],
  },
  {
    name: 'Order Items',
    columns: [
      { name: 'ItemId', type: 'INTEGER', primaryKey: true },
      { name: 'order', type: 'INTEGER', references: { table: 'Orders', column: 'OrderId' } },
      { name: 'ProductId', type: 'INTEGER', references: { table: 'Products', column: 'ProductId' } },
      { name: 'Quantity', type: 'INTEGER' },
      { name: 'SalePrice', type: 'REAL' },
    ],
  },
  {
    name: 'Reviews',
    columns: [
      { name: 'ReviewId', type: 'INTEGER', primaryKey: true },
      { name: 'ProductId', type: 'INTEGER', references: { table: 'Products', column: 'ProductId' } },
      { name: 'CustomerId', type: 'INTEGER', references: { table: 'Customers', column: 'CustomerId' } },
      { name: 'Rating', type: 'INTEGER' },
      { name: 'ReviewDate', type: 'TEXT', temporal: true },
      { name: 'Comment', type: 'TEXT', nullable: true },
    ],
  },
];

/** Products per group with a typical list price in dollars; generation jitters it by up to 20 %. */
const CATALOGUE: readonly (readonly [group: string, products: readonly (readonly [name: string, basePrice: number])[]])[] = [
  ['Electronics', [['Wireless Mouse', 25], ['USB-C Charger', 19], ['Bluetooth Speaker', 59], ['Noise-Cancelling Headphones', 229], ['Mechanical Keyboard', 89], ['27-inch Monitor', 279], ['HD Webcam', 49], ['Portable SSD', 119], ['Smart Watch', 199], ['E-Reader', 139]]],
  ['Kitchen', [['Chef Knife', 69], ['Cast Iron Skillet', 39], ['French Press', 29], ['Electric Kettle', 45], ['Bamboo Cutting Board', 18], ['Stand Mixer', 299], ['Spice Rack', 24], ['Nonstick Saucepan', 35], ['Salad Spinner', 22]]],
  ['Books', [['The Silent Orchard', 16], ['Data and the City', 32], ['A Short History of Maps', 24], ['Cooking for Two', 21], ['The Last Lighthouse', 14], ['Learning SQL the Hard Way', 39], ['Mountains of the North', 28], ['Tales from the Harbour', 12]]],
  ['Garden', [['Pruning Shears', 22], ['Garden Hose', 34], ['Seed Starter Kit', 15], ['Bird Feeder', 27], ['Watering Can', 17], ['Compost Bin', 79], ['Solar Path Lights', 44], ['Raised Bed Planter', 119]]],
  ['Toys', [['Wooden Train Set', 54], ['Puzzle 1000 Pieces', 19], ['Plush Bear', 16], ['Building Blocks', 39], ['Kite', 14], ['Board Game Classics', 32], ['Remote Control Car', 64], ['Art Easel', 49]]],
  ['Sports', [['Yoga Mat', 29], ['Running Shoes', 119], ['Tennis Racket', 139], ['Cycling Helmet', 69], ['Dumbbell Pair', 49], ['Water Bottle', 15], ['Football', 25], ['Camping Tent', 189]]],
  ['Clothing', [['Rain Jacket', 89], ['Wool Scarf', 35], ['Denim Jeans', 59], ['Linen Shirt', 45], ['Hiking Socks', 14], ['Leather Belt', 39], ['Winter Gloves', 24], ['Sun Hat', 22]]],
];

const ORDER_STATUSES = [['delivered', 10], ['shipped', 3], ['processing', 2], ['cancelled', 2], ['returned', 1]] as const;
const SHIPPING_COSTS = [0, 4.99, 7.5, 9.99, 14.99] as const;
const COMMENTS = [
  'Great value for the price.', 'Arrived quickly and works as described.', 'Smaller than expected.',
  'Would buy again.', 'Stopped working after a month.', 'Excellent quality.', 'Packaging was damaged.',
  'Exactly what I needed.', 'Not worth the money.', 'My kids love it.',
] as const;

function generateRows(rng: Mulberry32, vocabulary: Vocabulary = STANDARD_VOCABULARY): Map<string, RowData[]> {
  const customers = uniqueNames(rng.fork('names'), 120, vocabulary).map(([first, last], i): RowData => {
    const [city, country] = rng.weighted(vocabulary.cities.map((c) => [c, c[2]] as const));
    return {
      CustomerId: i + 1,
      FirstName: first,
      LastName: last,
      Email: rng.chance(0.1) ? null : emailFor(first, last, rng.pick(['mail.com', 'inbox.net', 'post.org']), i + 1),
      City: city,
      Country: country,
      JoinedOn: randomDate(rng, '2019-01-01', '2023-06-30'),
    };
  });

  const products: RowData[] = [];
  // Brands come from their own stream, so the other draws are the same with or without them.
  const brands = vocabulary.productBrands === null ? null : rng.fork('brands').shuffle(vocabulary.productBrands);
  for (const [group, catalogue] of CATALOGUE) {
    for (const [product, basePrice] of catalogue) {
      const name = brands === null ? product : `${brands[products.length % brands.length] as string} ${product}`;
      // Shop prices end in .99, .49 or .95 most of the time.
      const cents = rng.pick([0.99, 0.49, 0.95, 0.99, 0.25]);
      products.push({
        ProductId: products.length + 1,
        Name: name,
        group,
        UnitPrice: Math.round((Math.max(1, Math.round(basePrice * (0.8 + 0.4 * rng.float())) - 1) + cents) * 100) / 100,
        StockLevel: rng.chance(0.1) ? 0 : rng.int(3, 250),
        Discontinued: rng.chance(0.08) ? 1 : 0,
      });
    }
  }

  // About one customer in eight never orders, and a few products never sell,
  // so NOT IN / EXCEPT questions have answers.
  const buyers = customers.filter(() => !rng.chance(0.13));
  const sellable = products.filter(() => !rng.chance(0.08));
  const orders: RowData[] = [];
  const items: RowData[] = [];
  for (let i = 0; i < 320; i++) {
    const buyer = rng.pick(buyers);
    const orderId = i + 1;
    orders.push({
      OrderId: orderId,
      CustomerId: buyer.CustomerId ?? null,
      OrderDate: randomDate(rng, '2022-01-01', '2024-12-31'),
      Status: rng.weighted(ORDER_STATUSES),
      ShippingCost: rng.pick(SHIPPING_COSTS),
    });
    for (const product of rng.sample(sellable, rng.weighted([[1, 4], [2, 3], [3, 2], [4, 1]]))) {
      const discount = rng.weighted([[0, 6], [0.1, 2], [0.15, 1], [0.2, 1]]);
      items.push({
        ItemId: items.length + 1,
        order: orderId,
        ProductId: product.ProductId ?? null,
        Quantity: rng.weighted([[1, 8], [2, 4], [3, 2], [5, 1]]),
        SalePrice: Math.round(Number(product.UnitPrice) * (1 - discount) * 100) / 100,
      });
    }
  }

  const reviews: RowData[] = [];
  const reviewed = new Set<string>();
  const orderById = new Map(orders.map((o) => [o.OrderId, o]));
  for (const item of rng.sample(items, 190)) {
    const order = orderById.get(item.order ?? null);
    if (order === undefined || order.Status === 'cancelled') continue;
    const key = `${String(item.ProductId)}:${String(order.CustomerId)}`;
    if (reviewed.has(key)) continue;
    reviewed.add(key);
    reviews.push({
      ReviewId: reviews.length + 1,
      ProductId: item.ProductId ?? null,
      CustomerId: order.CustomerId ?? null,
      Rating: rng.weighted([[5, 5], [4, 4], [3, 2], [2, 1], [1, 1]]),
      ReviewDate: addDays(String(order.OrderDate), rng.int(3, 40)),
      Comment: rng.chance(0.4) ? null : rng.pick(COMMENTS),
    });
  }

  return new Map([
    ['Customers', customers],
    ['Products', products],
    ['Orders', orders],
    ['Order Items', items],
    ['Reviews', reviews],
  ]);
}

export const retailShop: DomainSpec = {
  dbId: 'retail_shop',
  title: 'Retail shop',
  summary: 'An online shop: customers, products in groups, orders, order items and product reviews (identifiers that need quoting).',
  tables,
  generateRows,
  templates: retailShopTemplates,
};
