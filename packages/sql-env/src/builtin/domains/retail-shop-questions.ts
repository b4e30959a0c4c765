import { inCountry } from '../vocabulary.ts';
import { defineTemplate, noTieAfter, sqlText as t, type QuestionTemplate } from '../question-template.ts';

const CITY = 'SELECT DISTINCT City FROM Customers ORDER BY City';
const COUNTRY = 'SELECT DISTINCT Country FROM Customers ORDER BY Country';
const GROUP = 'SELECT DISTINCT "group" FROM Products ORDER BY "group"';
const PRODUCT = 'SELECT Name FROM Products ORDER BY ProductId';
const BUYER = 'SELECT DISTINCT c.FirstName, c.LastName FROM Customers c JOIN Orders o ON o.CustomerId = c.CustomerId ORDER BY c.CustomerId';
const YEARS = ['2022', '2023', '2024'] as const;

const byName = (first: string, last: string, alias = ''): string =>
  `${alias}FirstName = ${t(first)} AND ${alias}LastName = ${t(last)}`;

export const retailShopTemplates: readonly QuestionTemplate[] = [
  defineTemplate({
    id: 'customers-in-city', answer: 'integer', instances: 4,
    params: (p) => ({ city: p.text(CITY) }),
    question: ({ city }) => `How many customers live in ${city}?`,
    sql: ({ city }) => `SELECT COUNT(*) FROM Customers WHERE City = ${t(city)}`,
  }),
  defineTemplate({
    id: 'products-in-group', answer: 'integer', instances: 3,
    params: (p) => ({ group: p.text(GROUP) }),
    question: ({ group }) => `How many products does the shop sell in the ${group} group?`,
    sql: ({ group }) => `SELECT COUNT(*) FROM Products WHERE "group" = ${t(group)}`,
  }),
  defineTemplate({
    id: 'customer-email', answer: 'string', instances: 4,
    params: (p) => ({ name: p.pair('SELECT FirstName, LastName FROM Customers WHERE Email IS NOT NULL ORDER BY CustomerId') }),
    question: ({ name }) => `What is the email address of the customer ${name.join(' ')}?`,
    sql: ({ name }) => `SELECT Email FROM Customers WHERE ${byName(...name)}`,
  }),
  defineTemplate({
    id: 'customers-without-email', answer: 'integer', instances: 3,
    params: (p) => ({ country: p.text(COUNTRY) }),
    question: ({ country }) => `How many customers in ${inCountry(country)} have not given an email address?`,
    sql: ({ country }) => `SELECT COUNT(*) FROM Customers WHERE Country = ${t(country)} AND Email IS NULL`,
  }),
  defineTemplate({
    id: 'product-price', answer: 'float', instances: 3,
    params: (p) => ({ product: p.text(PRODUCT) }),
    question: ({ product }) => `What is the unit price of the ${product}?`,
    sql: ({ product }) => `SELECT UnitPrice FROM Products WHERE Name = ${t(product)}`,
  }),
  defineTemplate({
    id: 'average-price-in-group', answer: 'float', instances: 3,
    params: (p) => ({ group: p.text(GROUP) }),
    question: ({ group }) => `What is the average unit price of products in the ${group} group, rounded to two decimals?`,
    sql: ({ group }) => `SELECT ROUND(AVG(UnitPrice), 2) FROM Products WHERE "group" = ${t(group)}`,
  }),
  defineTemplate({
    id: 'max-price-in-group', answer: 'float', instances: 2,
    params: (p) => ({ group: p.text(GROUP), highest: p.pick([true, false]) }),
    question: ({ group, highest }) => `What is the ${highest ? 'highest' : 'lowest'} unit price of any product in the ${group} group?`,
    sql: ({ group, highest }) => `SELECT ${highest ? 'MAX' : 'MIN'}(UnitPrice) FROM Products WHERE "group" = ${t(group)}`,
  }),
  defineTemplate({
    id: 'cheap-products-in-group', answer: 'list', instances: 3,
    params: (p) => ({ group: p.text(GROUP), limit: p.pick([20, 30, 50, 100]) }),
    question: ({ group, limit }) => `List the names of products in the ${group} group that cost less than ${limit} dollars.`,
    sql: ({ group, limit }) => `SELECT Name FROM Products WHERE "group" = ${t(group)} AND UnitPrice < ${limit} ORDER BY Name`,
  }),
  defineTemplate({
    id: 'priciest-in-group', answer: 'string', instances: 3,
    params: (p) => ({ group: p.text(GROUP) }),
    question: ({ group }) => `Which product in the ${group} group has the highest unit price?`,
    sql: ({ group }) => `SELECT Name FROM Products WHERE "group" = ${t(group)} ORDER BY UnitPrice DESC LIMIT 1`,
    check: ({ group }) => noTieAfter(`SELECT UnitPrice FROM Products WHERE "group" = ${t(group)} ORDER BY UnitPrice DESC`, 1),
  }),
  defineTemplate({
    id: 'top-priced-table', answer: 'table', instances: 3,
    params: (p) => ({ group: p.text(GROUP), k: p.int(2, 4) }),
    question: ({ group, k }) => `Give the name and unit price of the ${k} most expensive products in the ${group} group.`,
    sql: ({ group, k }) => `SELECT Name, UnitPrice FROM Products WHERE "group" = ${t(group)} ORDER BY UnitPrice DESC LIMIT ${k}`,
    check: ({ group, k }) => noTieAfter(`SELECT UnitPrice FROM Products WHERE "group" = ${t(group)} ORDER BY UnitPrice DESC`, k),
  }),
  defineTemplate({
    id: 'cheapest-products', answer: 'list', instances: 2,
    params: (p) => ({ k: p.int(3, 5) }),
    question: ({ k }) => `What are the names of the ${k} cheapest products in the shop?`,
    sql: ({ k }) => `SELECT Name FROM Products ORDER BY UnitPrice ASC LIMIT ${k}`,
    check: ({ k }) => noTieAfter('SELECT UnitPrice FROM Products ORDER BY UnitPrice ASC', k),
  }),
  defineTemplate({
    id: 'out-of-stock', answer: 'list', instances: 1,
    params: () => ({}),
    question: () => 'Which products are currently out of stock?',
    sql: () => 'SELECT Name FROM Products WHERE StockLevel = 0 ORDER BY Name',
  }),
  defineTemplate({
    id: 'orders-by-customer', answer: 'integer', instances: 4,
    params: (p) => ({ name: p.pair(BUYER) }),
    question: ({ name }) => `How many orders has ${name.join(' ')} placed?`,
    sql: ({ name }) => `SELECT COUNT(*) FROM Orders o JOIN Customers c ON c.CustomerId = o.CustomerId WHERE ${byName(...name, 'c.')}`,
  }),
  defineTemplate({
    id: 'orders-in-year', answer: 'integer', instances: 3,
    params: (p) => ({ year: p.pick(YEARS), status: p.text('SELECT DISTINCT Status FROM Orders ORDER BY Status') }),
    question: ({ year, status }) => `How many orders placed in ${year} have the status '${status}'?`,
    sql: ({ year, status }) => `SELECT COUNT(*) FROM Orders WHERE strftime('%Y', OrderDate) = '${year}' AND Status = ${t(status)}`,
  }),
  defineTemplate({
    id: 'group-revenue', answer: 'float', instances: 3,
    params: (p) => ({ group: p.text(GROUP) }),
    question: ({ group }) => `What is the total revenue (quantity times sale price) from ${group} products in orders that were not cancelled?`,
    sql: ({ group }) => `SELECT ROUND(SUM(oi.Quantity * oi.SalePrice), 2) FROM "Order Items" oi JOIN Products p ON p.ProductId = oi.ProductId JOIN Orders o ON o.OrderId = oi."order" WHERE p."group" = ${t(group)} AND o.Status <> 'cancelled'`,
  }),
  defineTemplate({
    id: 'products-bought-by', answer: 'list', instances: 4,
    params: (p) => ({ name: p.pair(BUYER) }),
    question: ({ name }) => `Which products has ${name.join(' ')} ordered? List each product name once.`,
    sql: ({ name }) => `SELECT DISTINCT p.Name FROM Customers c JOIN Orders o ON o.CustomerId = c.CustomerId JOIN "Order Items" oi ON oi."order" = o.OrderId JOIN Products p ON p.ProductId = oi.ProductId WHERE ${byName(...name, 'c.')} ORDER BY p.Name`,
  }),
  defineTemplate({
    id: 'distinct-buyers-of-product', answer: 'integer', instances: 3,
    params: (p) => ({ product: p.text(`SELECT DISTINCT p.Name FROM Products p JOIN "Order Items" oi ON oi.ProductId = p.ProductId ORDER BY p.Name`) }),
    question: ({ product }) => `How many different customers have ordered the ${product}?`,
    sql: ({ product }) => `SELECT COUNT(DISTINCT o.CustomerId) FROM "Order Items" oi JOIN Orders o ON o.OrderId = oi."order" JOIN Products p ON p.ProductId = oi.ProductId WHERE p.Name = ${t(product)}`,
  }),
  defineTemplate({
    id: 'products-per-group', answer: 'table', instances: 1,
    params: () => ({}),
    question: () => 'For each product group, how many products are there? Give the group and the count.',
    sql: () => 'SELECT "group", COUNT(*) FROM Products GROUP BY "group" ORDER BY "group"',
  }),
  defineTemplate({
    id: 'orders-per-status', answer: 'table', instances: 1,
    params: () => ({}),
    question: () => 'For each order status, give the number of orders and their total shipping cost.',
    sql: () => 'SELECT Status, COUNT(*), ROUND(SUM(ShippingCost), 2) FROM Orders GROUP BY Status ORDER BY Status',
  }),
  defineTemplate({
    id: 'busy-cities', answer: 'list', instances: 3,
    params: (p) => ({ n: p.int(3, 7) }),
    question: ({ n }) => `Which cities have more than ${n} customers?`,
    sql: ({ n }) => `SELECT City FROM Customers GROUP BY City HAVING COUNT(*) > ${n} ORDER BY City`,
  }),
  defineTemplate({
    id: 'big-spenders-by-country', answer: 'table', instances: 2,
    params: (p) => ({ n: p.int(3, 6) }),
    question: ({ n }) => `For each country whose customers have placed at least ${n} orders, give the country and its number of orders.`,
    sql: ({ n }) => `SELECT c.Country, COUNT(*) FROM Orders o JOIN Customers c ON c.CustomerId = o.CustomerId GROUP BY c.Country HAVING COUNT(*) >= ${n} ORDER BY c.Country`,
  }),
  defineTemplate({
    id: 'customers-never-ordered', answer: 'list', instances: 3,
    params: (p) => ({ country: p.text(COUNTRY) }),
    question: ({ country }) => `Which customers from ${inCountry(country)} have never placed an order? Give their full names.`,
    sql: ({ country }) => `SELECT FirstName || ' ' || LastName FROM Customers WHERE Country = ${t(country)} AND CustomerId NOT IN (SELECT CustomerId FROM Orders) ORDER BY 1`,
  }),
  defineTemplate({
    id: 'products-never-ordered', answer: 'list', instances: 1,
    params: () => ({}),
    question: () => 'Which products have never been ordered?',
    sql: () => 'SELECT Name FROM Products WHERE ProductId NOT IN (SELECT ProductId FROM "Order Items") ORDER BY Name',
  }),
  defineTemplate({
    id: 'above-average-price', answer: 'list', instances: 3,
    params: (p) => ({ group: p.text(GROUP) }),
    question: ({ group }) => `Which products in the ${group} group cost more than the average unit price of all products?`,
    sql: ({ group }) => `SELECT Name FROM Products WHERE "group" = ${t(group)} AND UnitPrice > (SELECT AVG(UnitPrice) FROM Products) ORDER BY Name`,
  }),
  defineTemplate({
    id: 'groups-never-bought', answer: 'list', instances: 3,
    params: (p) => ({ name: p.pair(BUYER) }),
    question: ({ name }) => `From which product groups has ${name.join(' ')} never ordered anything?`,
    sql: ({ name }) => `SELECT "group" FROM Products EXCEPT SELECT p."group" FROM Products p JOIN "Order Items" oi ON oi.ProductId = p.ProductId JOIN Orders o ON o.OrderId = oi."order" JOIN Customers c ON c.CustomerId = o.CustomerId WHERE ${byName(...name, 'c.')}`,
  }),
  defineTemplate({
    id: 'bought-both-groups', answer: 'list', instances: 3,
    params: (p) => ({ city: p.text(CITY), groups: p.twoTexts(GROUP) }),
    question: ({ city, groups: [a, b] }) => `Which customers from ${city} have ordered both ${a} and ${b} products? Give their full names.`,
    sql: ({ city, groups }) => {
      const buyersOf = (group: string): string =>
        `SELECT c.FirstName || ' ' || c.LastName FROM Customers c JOIN Orders o ON o.CustomerId = c.CustomerId JOIN "Order Items" oi ON oi."order" = o.OrderId JOIN Products p ON p.ProductId = oi.ProductId WHERE c.City = ${t(city)} AND p."group" = ${t(group)}`;
      return `${buyersOf(groups[0])} INTERSECT ${buyersOf(groups[1])}`;
    },
  }),
  defineTemplate({
    id: 'average-rating', answer: 'float', instances: 3,
    params: (p) => ({ product: p.text('SELECT DISTINCT p.Name FROM Products p JOIN Reviews r ON r.ProductId = p.ProductId ORDER BY p.Name') }),
    question: ({ product }) => `What is the average review rating of the ${product}, rounded to two decimals?`,
    sql: ({ product }) => `SELECT ROUND(AVG(r.Rating), 2) FROM Reviews r JOIN Products p ON p.ProductId = r.ProductId WHERE p.Name = ${t(product)}`,
  }),
  defineTemplate({
    id: 'best-rated-in-group', answer: 'string', instances: 3,
    params: (p) => ({ group: p.text(GROUP) }),
    question: ({ group }) => `Which ${group} product has the highest average review rating?`,
    sql: ({ group }) => `SELECT p.Name FROM Products p JOIN Reviews r ON r.ProductId = p.ProductId WHERE p."group" = ${t(group)} GROUP BY p.ProductId ORDER BY AVG(r.Rating) DESC LIMIT 1`,
    check: ({ group }) => noTieAfter(`SELECT AVG(r.Rating) FROM Products p JOIN Reviews r ON r.ProductId = p.ProductId WHERE p."group" = ${t(group)} GROUP BY p.ProductId ORDER BY AVG(r.Rating) DESC`, 1),
  }),
  defineTemplate({
    id: 'reviews-without-comment', answer: 'integer', instances: 2,
    params: (p) => ({ rating: p.int(1, 5) }),
    question: ({ rating }) => `How many ${rating}-star reviews were left without a comment?`,
    sql: ({ rating }) => `SELECT COUNT(*) FROM Reviews WHERE Rating = ${rating} AND Comment IS NULL`,
  }),
  defineTemplate({
    id: 'order-statuses-of-customer', answer: 'list', instances: 2,
    params: (p) => ({ name: p.pair(BUYER) }),
    question: ({ name }) => `What are the distinct statuses of the orders placed by ${name.join(' ')}?`,
    sql: ({ name }) => `SELECT DISTINCT o.Status FROM Orders o JOIN Customers c ON c.CustomerId = o.CustomerId WHERE ${byName(...name, 'c.')} ORDER BY o.Status`,
  }),
  defineTemplate({
    id: 'customer-orders-table', answer: 'table', instances: 3,
    params: (p) => ({ name: p.pair(BUYER) }),
    question: ({ name }) => `List the date and status of every order ${name.join(' ')} has placed.`,
    sql: ({ name }) => `SELECT o.OrderDate, o.Status FROM Orders o JOIN Customers c ON c.CustomerId = o.CustomerId WHERE ${byName(...name, 'c.')} ORDER BY o.OrderDate, o.OrderId`,
  }),
  defineTemplate({
    id: 'largest-order-customer', answer: 'string', instances: 2,
    params: (p) => ({ year: p.pick(YEARS) }),
    question: ({ year }) => `Which customer placed the order with the most items (by total quantity) in ${year}? Give the full name.`,
    sql: ({ year }) => `SELECT c.FirstName || ' ' || c.LastName FROM Customers c JOIN Orders o ON o.CustomerId = c.CustomerId JOIN "Order Items" oi ON oi."order" = o.OrderId WHERE strftime('%Y', o.OrderDate) = '${year}' GROUP BY o.OrderId ORDER BY SUM(oi.Quantity) DESC LIMIT 1`,
    check: ({ year }) => noTieAfter(`SELECT SUM(oi.Quantity) FROM Orders o JOIN "Order Items" oi ON oi."order" = o.OrderId WHERE strftime('%Y', o.OrderDate) = '${year}' GROUP BY o.OrderId ORDER BY SUM(oi.Quantity) DESC`, 1),
  }),
];
